/* openat2(2): its strict argument checks and the RESOLVE_* limits on the
 * path walk, in a scratch tree under /tmp. */
#include "t.h"
#include <stdint.h>
#include <sys/syscall.h>

struct how {
	uint64_t flags, mode, resolve;
};

#define R_NO_XDEV 0x01
#define R_NO_MAGICLINKS 0x02
#define R_NO_SYMLINKS 0x04
#define R_BENEATH 0x08
#define R_IN_ROOT 0x10
#define R_CACHED 0x20

static long o2(int dfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve)
{
	struct how h = { flags, mode, resolve };
	return syscall(SYS_openat2, dfd, path, &h, sizeof h);
}

/* Opens, reads up to 15 bytes and closes: the text, or "" on failure. */
static const char *content(int dfd, const char *path, uint64_t resolve)
{
	static char buf[16];
	long fd = o2(dfd, path, O_RDONLY, 0, resolve);
	memset(buf, 0, sizeof buf);
	if (fd < 0)
		return "";
	if (read(fd, buf, sizeof buf - 1) < 0)
		buf[0] = 0;
	close(fd);
	return buf;
}

static void put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, text, strlen(text)) < 0)
		t_fail(path);
	close(fd);
}

int main(void)
{
	char d[] = "/tmp/openat2-XXXXXX", p[128];
	if (!mkdtemp(d))
		return 99;
	snprintf(p, sizeof p, "%s/sub", d);
	EXPECT(mkdir(p, 0755), 0);
	snprintf(p, sizeof p, "%s/etc", d);
	EXPECT(mkdir(p, 0755), 0);
	snprintf(p, sizeof p, "%s/sub/f", d);
	put(p, "inside");
	snprintf(p, sizeof p, "%s/etc/passwd", d);
	put(p, "scoped");
	snprintf(p, sizeof p, "%s/sub/abs", d);
	EXPECT(symlink("/etc", p), 0);
	snprintf(p, sizeof p, "%s/sub/up", d);
	EXPECT(symlink("../sub/f", p), 0);
	snprintf(p, sizeof p, "%s/sub/esc", d);
	EXPECT(symlink("../../..", p), 0);
	int dfd = open(d, O_PATH | O_DIRECTORY);
	EXPECT_TRUE(dfd >= 0);

	/* The struct: too small, too large, unknown tail bytes. */
	struct { struct how h; uint64_t extra; } big = { { O_RDONLY, 0, 0 }, 0 };
	long fd = syscall(SYS_openat2, dfd, "sub/f", &big, sizeof big);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	big.extra = 1;
	EXPECT_ERR(syscall(SYS_openat2, dfd, "sub/f", &big, sizeof big), E2BIG);
	EXPECT_ERR(syscall(SYS_openat2, dfd, "sub/f", &big, 16), EINVAL);
	EXPECT_ERR(syscall(SYS_openat2, dfd, "sub/f", &big, 8192), E2BIG);
	EXPECT_ERR(syscall(SYS_openat2, dfd, "sub/f", BADPTR, 24), EFAULT);

	/* Flags, mode and resolve are checked strictly. */
	EXPECT_ERR(o2(dfd, "sub/f", 1ULL << 40, 0, 0), EINVAL);
	EXPECT_ERR(o2(dfd, "sub/f", O_RDONLY, 0644, 0), EINVAL);
	EXPECT_ERR(o2(dfd, "sub/n", O_CREAT | O_WRONLY, 010000, 0), EINVAL);
	EXPECT_ERR(o2(dfd, "sub/f", O_PATH | O_APPEND, 0, 0), EINVAL);
	EXPECT_ERR(o2(dfd, "sub/f", O_RDONLY, 0, 0x40), EINVAL);
	EXPECT_ERR(o2(dfd, "sub/f", O_RDONLY, 0, R_BENEATH | R_IN_ROOT), EINVAL);
	EXPECT_ERR(o2(dfd, "sub/n", O_CREAT | O_WRONLY, 0600, R_CACHED), EAGAIN);

	/* RESOLVE_BENEATH: nothing may lead out of the directory. */
	SHOW("beneath f: %s", content(dfd, "sub/f", R_BENEATH));
	SHOW("beneath up: %s", content(dfd, "sub/up", R_BENEATH));
	SHOW("beneath dotdot: %s", content(dfd, "sub/../sub/f", R_BENEATH));
	EXPECT_ERR(o2(dfd, "/etc/passwd", O_RDONLY, 0, R_BENEATH), EXDEV);
	EXPECT_ERR(o2(dfd, "../x", O_RDONLY, 0, R_BENEATH), EXDEV);
	EXPECT_ERR(o2(dfd, "sub/abs/passwd", O_RDONLY, 0, R_BENEATH), EXDEV);
	EXPECT_ERR(o2(dfd, "sub/esc/etc", O_RDONLY, 0, R_BENEATH), EXDEV);
	fd = o2(dfd, "sub/new", O_CREAT | O_WRONLY | O_EXCL, 0640, R_BENEATH);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	struct stat st;
	snprintf(p, sizeof p, "%s/sub/new", d);
	EXPECT(stat(p, &st), 0);
	EXPECT(st.st_mode & 07777, 0640 & ~022);

	/* RESOLVE_IN_ROOT: the directory is "/" for the walk. */
	SHOW("in_root abs: %s", content(dfd, "/sub/f", R_IN_ROOT));
	SHOW("in_root climb: %s", content(dfd, "../../../sub/f", R_IN_ROOT));
	SHOW("in_root symlink: %s", content(dfd, "sub/abs/passwd", R_IN_ROOT));
	SHOW("in_root escape: %s", content(dfd, "sub/esc/etc/passwd", R_IN_ROOT));

	/* RESOLVE_NO_SYMLINKS: no link is followed, a final one may be named. */
	EXPECT_ERR(o2(dfd, "sub/up", O_RDONLY, 0, R_NO_SYMLINKS), ELOOP);
	EXPECT_ERR(o2(dfd, "sub/abs/passwd", O_RDONLY, 0, R_NO_SYMLINKS), ELOOP);
	fd = o2(dfd, "sub/up", O_PATH | O_NOFOLLOW, 0, R_NO_SYMLINKS);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	SHOW("no_symlinks f: %s", content(dfd, "sub/f", R_NO_SYMLINKS));

	/* RESOLVE_NO_MAGICLINKS: /proc's object links, not plain symlinks. */
	EXPECT_ERR(o2(AT_FDCWD, "/proc/self/fd/0", O_RDONLY, 0, R_NO_MAGICLINKS), ELOOP);
	EXPECT_ERR(o2(AT_FDCWD, "/proc/self/exe", O_RDONLY, 0, R_NO_MAGICLINKS), ELOOP);
	fd = o2(AT_FDCWD, "/proc/self/status", O_RDONLY, 0, R_NO_MAGICLINKS);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	EXPECT_ERR(o2(dfd, "/proc/self/fd/0", O_RDONLY, 0, R_IN_ROOT), ENOENT);

	/* RESOLVE_NO_XDEV: /proc is another mount. */
	EXPECT_ERR(o2(AT_FDCWD, "/proc/self/status", O_RDONLY, 0, R_NO_XDEV), EXDEV);
	SHOW("no_xdev f: %s", content(dfd, "sub/f", R_NO_XDEV));

	/* Clean up the scratch tree. */
	const char *names[] = { "sub/f", "sub/new", "sub/abs", "sub/up", "sub/esc", "etc/passwd" };
	for (unsigned i = 0; i < sizeof names / sizeof *names; i++) {
		snprintf(p, sizeof p, "%s/%s", d, names[i]);
		unlink(p);
	}
	snprintf(p, sizeof p, "%s/sub", d);
	rmdir(p);
	snprintf(p, sizeof p, "%s/etc", d);
	rmdir(p);
	rmdir(d);
	return t_done();
}
