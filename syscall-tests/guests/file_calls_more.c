/* File calls in a writable directory that no other guest makes succeed:
 * O_TMPFILE (and giving it a name), mknodat of a FIFO, fchownat,
 * symlinkat, openat2 with RESOLVE_CACHED; and a file description's
 * offset shared across fork. */
#include "t.h"
#include <linux/openat2.h>

int main(void)
{
	umask(022);
	char dir[64];
	snprintf(dir, sizeof dir, "/tmp/file-calls-%d", (int)getpid());
	EXPECT(mkdir(dir, 0755), 0);
	int d = EXPECT(open(dir, O_RDONLY | O_DIRECTORY), 3);

	/* O_TMPFILE: a file with no name, until linkat gives it one. */
	int t = EXPECT(openat(d, ".", O_TMPFILE | O_RDWR, 0600), 4);
	EXPECT(write(t, "tmp", 3), 3);
	struct stat st;
	EXPECT(fstat(t, &st), 0);
	EXPECT(st.st_nlink, 0);
	EXPECT_TRUE(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600);
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", t);
	EXPECT(linkat(AT_FDCWD, proc, d, "named", AT_SYMLINK_FOLLOW), 0);
	EXPECT(fstat(t, &st), 0);
	EXPECT(st.st_nlink, 1);
	char buf[8] = { 0 };
	int n = EXPECT(openat(d, "named", O_RDONLY), 5);
	EXPECT(read(n, buf, sizeof buf), 3);
	EXPECT_TRUE(memcmp(buf, "tmp", 3) == 0);
	EXPECT(close(n), 0);
	/* O_TMPFILE | O_EXCL: never linkable. */
	int x = EXPECT(openat(d, ".", O_TMPFILE | O_WRONLY | O_EXCL, 0600), 5);
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", x);
	EXPECT_ERR(linkat(AT_FDCWD, proc, d, "never", AT_SYMLINK_FOLLOW), ENOENT);
	/* ... nor through linkat's AT_EMPTY_PATH. */
	EXPECT_ERR(linkat(x, "", d, "never", AT_EMPTY_PATH), ENOENT);
	EXPECT(close(x), 0);
	/* AT_EMPTY_PATH names the descriptor's own file (root may): a nameless
	 * one, a named one, one open O_PATH; never a directory. */
	int e = EXPECT(openat(d, ".", O_TMPFILE | O_RDWR, 0640), 5);
	EXPECT(write(e, "empty", 5), 5);
	EXPECT(linkat(e, "", d, "by-empty", AT_EMPTY_PATH), 0);
	EXPECT(fstat(e, &st), 0);
	EXPECT(st.st_nlink, 1);
	EXPECT_ERR(linkat(e, "", d, "by-empty", AT_EMPTY_PATH), EEXIST);
	EXPECT(linkat(e, "", d, "by-empty-2", AT_EMPTY_PATH), 0);
	EXPECT(fstat(e, &st), 0);
	EXPECT(st.st_nlink, 2);
	EXPECT(close(e), 0);
	int op = EXPECT(openat(d, "by-empty", O_PATH), 5);
	EXPECT(linkat(op, "", d, "by-path", AT_EMPTY_PATH), 0);
	EXPECT(close(op), 0);
	EXPECT(fstatat(d, "by-path", &st, 0), 0);
	EXPECT_TRUE(st.st_nlink == 3 && st.st_size == 5);
	EXPECT_ERR(linkat(d, "", d, "dir-link", AT_EMPTY_PATH), EPERM);
	EXPECT_ERR(linkat(d, "", d, "dir-link", 0), ENOENT);
	EXPECT(unlinkat(d, "by-empty", 0), 0);
	EXPECT(unlinkat(d, "by-empty-2", 0), 0);
	EXPECT(unlinkat(d, "by-path", 0), 0);
	EXPECT_ERR(openat(d, "named", O_TMPFILE | O_RDWR, 0600), ENOTDIR);
	EXPECT_ERR(openat(d, ".", O_TMPFILE | O_RDONLY, 0600), EINVAL);

	/* mknodat: a FIFO. */
	EXPECT(mknodat(d, "fifo", S_IFIFO | 0640, 0), 0);
	EXPECT(fstatat(d, "fifo", &st, 0), 0);
	EXPECT_TRUE(S_ISFIFO(st.st_mode) && (st.st_mode & 0777) == 0640);
	EXPECT_ERR(mknodat(d, "fifo", S_IFIFO | 0600, 0), EEXIST);
	int rd = EXPECT(openat(d, "fifo", O_RDONLY | O_NONBLOCK), 5);
	int wr = EXPECT(openat(d, "fifo", O_WRONLY | O_NONBLOCK), 6);
	EXPECT(write(wr, "ab", 2), 2);
	EXPECT(read(rd, buf, sizeof buf), 2);
	EXPECT(close(wr), 0);
	EXPECT(close(rd), 0);

	/* fchownat: owner and group change, and -1 keeps one. */
	EXPECT(fchownat(d, "named", 1234, 2345, 0), 0);
	EXPECT(fstatat(d, "named", &st, 0), 0);
	EXPECT_TRUE(st.st_uid == 1234 && st.st_gid == 2345);
	EXPECT(fchownat(d, "named", -1, 3456, 0), 0);
	EXPECT(fstatat(d, "named", &st, 0), 0);
	EXPECT_TRUE(st.st_uid == 1234 && st.st_gid == 3456);

	/* symlinkat and a lookup through it, AT_SYMLINK_NOFOLLOW on chown. */
	EXPECT(symlinkat("named", d, "link"), 0);
	EXPECT_ERR(symlinkat("named", d, "link"), EEXIST);
	char target[16] = { 0 };
	EXPECT(readlinkat(d, "link", target, sizeof target), 5);
	EXPECT_TRUE(strcmp(target, "named") == 0);
	EXPECT(fchownat(d, "link", 7, 8, AT_SYMLINK_NOFOLLOW), 0);
	EXPECT(fstatat(d, "link", &st, AT_SYMLINK_NOFOLLOW), 0);
	EXPECT_TRUE(S_ISLNK(st.st_mode) && st.st_uid == 7 && st.st_gid == 8);
	EXPECT(fstatat(d, "named", &st, 0), 0);
	EXPECT_TRUE(st.st_uid == 1234);

	/* RESOLVE_CACHED on a path just looked up: found without blocking. */
	struct open_how how = { .flags = O_RDONLY, .resolve = RESOLVE_CACHED };
	int c = EXPECT(syscall(SYS_openat2, d, "named", &how, sizeof how), 5);
	EXPECT(close(c), 0);
	how.flags = O_RDONLY | O_CREAT;
	how.mode = 0600;
	EXPECT_ERR(syscall(SYS_openat2, d, "new", &how, sizeof how), EAGAIN);

	/* A description's offset is shared across fork. */
	int f = EXPECT(openat(d, "named", O_RDONLY), 5);
	pid_t p = fork();
	if (p == 0)
		_exit(read(f, buf, 1) == 1 ? 0 : 1);
	int ws;
	EXPECT_TRUE(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	EXPECT(lseek(f, 0, SEEK_CUR), 1);
	EXPECT(close(f), 0);

	EXPECT(close(t), 0);
	EXPECT(unlinkat(d, "named", 0), 0);
	EXPECT(unlinkat(d, "fifo", 0), 0);
	EXPECT(unlinkat(d, "link", 0), 0);
	EXPECT(close(d), 0);
	EXPECT(rmdir(dir), 0);
	return t_done();
}
