/* readlink/readlinkat: targets, truncation and errors. */
#include "t.h"

static void rl(const char *path)
{
	char buf[PATH_MAX];
	ssize_t n = readlink(path, buf, sizeof buf);
	if (n >= 0)
		SHOW("readlink %s -> %.*s (%zd)", path, (int)n, buf, n);
	else
		SHOW("readlink %s: errno=%s", path, errname(errno));
}

int main(void)
{
	rl("/bin");
	rl("/etc/os-release");
	rl("/lib64/ld-linux-x86-64.so.2");
	rl(FIX("link_rel"));
	rl(FIX("link_dotdot"));
	rl(FIX("dangling"));
	rl(FIX("self"));
	rl(FIX("dir/up"));
	/* Only the last component is not followed. */
	rl(FIX("link_dir/up"));

	char buf[64];
	/* Truncation without NUL, returns the bytes placed. */
	memset(buf, 'X', sizeof buf);
	EXPECT(readlink("/bin", buf, 3), 3);
	SHOW("truncated: %.4s", buf);
	EXPECT_ERR(readlink("/bin", buf, 0), EINVAL);
	EXPECT_ERR(syscall(SYS_readlink, "/bin", buf, -1), EINVAL);
	EXPECT_ERR(readlink(FIX("file.txt"), buf, sizeof buf), EINVAL);
	EXPECT_ERR(readlink("/etc", buf, sizeof buf), EINVAL);
	EXPECT_ERR(readlink("/nonexistent", buf, sizeof buf), ENOENT);
	EXPECT_ERR(readlink(FIX("file.txt/x"), buf, sizeof buf), ENOTDIR);
	EXPECT_ERR(readlink("", buf, sizeof buf), ENOENT);
	EXPECT_ERR(syscall(SYS_readlink, "/bin", BADPTR, 64), EFAULT);
	EXPECT_ERR(syscall(SYS_readlink, BADPTR, buf, 64), EFAULT);

	/* readlinkat with a dirfd, AT_FDCWD, and an O_PATH fd + "". */
	int root = EXPECT(open("/", O_RDONLY | O_DIRECTORY), 3);
	EXPECT(readlinkat(root, "bin", buf, sizeof buf), 7);
	EXPECT(chdir(FIXTURES), 0);
	EXPECT(readlinkat(AT_FDCWD, "link_dir", buf, sizeof buf), 3);
	int lfd = EXPECT(open("link_rel", O_PATH | O_NOFOLLOW), 4);
	EXPECT(readlinkat(lfd, "", buf, sizeof buf), 8);
	SHOW("via O_PATH fd: %.8s", buf);
	int ffd = EXPECT(open("file.txt", O_PATH), 5);
	EXPECT_ERR(readlinkat(ffd, "", buf, sizeof buf), ENOENT);
	EXPECT_ERR(readlinkat(99, "x", buf, sizeof buf), EBADF);
	EXPECT_ERR(readlinkat(ffd, "x", buf, sizeof buf), ENOTDIR);
	EXPECT(close(ffd), 0);
	EXPECT(close(lfd), 0);
	EXPECT(close(root), 0);
	return t_done();
}
