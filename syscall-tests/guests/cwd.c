/* getcwd/chdir/fchdir, including symlinked directories and errors. */
#include "t.h"

static void pwd(void)
{
	char buf[PATH_MAX];
	if (getcwd(buf, sizeof buf))
		SHOW("cwd: %s", buf);
	else
		SHOW("cwd: errno=%s", errname(errno));
}

int main(void)
{
	EXPECT(chdir("/etc"), 0);
	pwd();
	EXPECT(chdir(".."), 0);
	pwd();
	EXPECT(chdir(".."), 0);
	pwd();
	/* getcwd reports the resolved path: /bin -> usr/bin. */
	EXPECT(chdir("/bin"), 0);
	pwd();
	EXPECT(chdir(".."), 0);
	pwd();
	EXPECT(chdir(FIX("link_dir")), 0);
	char buf[PATH_MAX];
	EXPECT_TRUE(getcwd(buf, sizeof buf) && !strcmp(buf, FIX("dir")));
	EXPECT(chdir("sub"), 0);
	EXPECT_TRUE(getcwd(buf, sizeof buf) && !strcmp(buf, FIX("dir/sub")));

	int fd = EXPECT(open("/usr/lib", O_RDONLY | O_DIRECTORY), 3);
	EXPECT(fchdir(fd), 0);
	pwd();
	EXPECT(close(fd), 0);
	fd = EXPECT(open("/usr", O_PATH | O_DIRECTORY), 3);
	EXPECT(fchdir(fd), 0);
	pwd();
	EXPECT(close(fd), 0);

	/* Errors leave the cwd alone. */
	EXPECT_ERR(chdir("/etc/passwd"), ENOTDIR);
	EXPECT_ERR(chdir("/nonexistent"), ENOENT);
	EXPECT_ERR(chdir(""), ENOENT);
	EXPECT_ERR(chdir(FIX("loop_a")), ELOOP);
	EXPECT_ERR(syscall(SYS_chdir, BADPTR), EFAULT);
	fd = EXPECT(open("/etc/passwd", O_RDONLY), 3);
	EXPECT_ERR(fchdir(fd), ENOTDIR);
	EXPECT(close(fd), 0);
	EXPECT_ERR(fchdir(99), EBADF);
	pwd();

	/* getcwd buffer handling: the raw call returns the length with NUL. */
	EXPECT(chdir("/usr/lib"), 0);
	EXPECT(syscall(SYS_getcwd, buf, sizeof buf), 9);
	EXPECT_ERR(syscall(SYS_getcwd, buf, 5), ERANGE);
	EXPECT_ERR(syscall(SYS_getcwd, buf, 9 - 1), ERANGE);
	EXPECT(syscall(SYS_getcwd, buf, 9), 9);
	EXPECT_ERR(syscall(SYS_getcwd, buf, 0), ERANGE);
	EXPECT_ERR(syscall(SYS_getcwd, BADPTR, 100), EFAULT);
	EXPECT(chdir("/"), 0);
	EXPECT(syscall(SYS_getcwd, buf, 2), 2);
	SHOW("root cwd: %s", buf);
	return t_done();
}
