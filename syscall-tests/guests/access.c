/* access/faccessat/faccessat2: modes, flags and errors (read-only checks). */
#include "t.h"

int main(void)
{
	EXPECT(access("/etc/passwd", F_OK), 0);
	EXPECT(access("/etc/passwd", R_OK), 0);
	EXPECT(access("/bin/echo", X_OK), 0);
	EXPECT(access("/bin/echo", R_OK | X_OK), 0);
	EXPECT(access("/etc", X_OK), 0);
	/* Even root needs one x bit to execute. */
	EXPECT_ERR(access(FIX("file.txt"), X_OK), EACCES);
	EXPECT(access(FIX("notelf"), X_OK), 0);
	EXPECT_ERR(access("/nonexistent", F_OK), ENOENT);
	EXPECT_ERR(access("/etc/passwd/x", F_OK), ENOTDIR);
	EXPECT_ERR(access(FIX("dangling"), F_OK), ENOENT);
	EXPECT_ERR(access(FIX("loop_a"), F_OK), ELOOP);
	EXPECT_ERR(access("", F_OK), ENOENT);
	EXPECT_ERR(access("/etc/passwd", 8), EINVAL);
	EXPECT_ERR(access("/etc/passwd", -1), EINVAL);
	EXPECT_ERR(syscall(SYS_access, BADPTR, F_OK), EFAULT);

	int dir = EXPECT(open(FIXTURES, O_RDONLY | O_DIRECTORY), 3);
	EXPECT(faccessat(dir, "file.txt", R_OK, 0), 0);
	EXPECT(faccessat(dir, "link_rel", F_OK, 0), 0);
	EXPECT_ERR(faccessat(dir, "nope", F_OK, 0), ENOENT);
	EXPECT_ERR(faccessat(99, "file.txt", F_OK, 0), EBADF);
	EXPECT(chdir(FIXTURES), 0);
	EXPECT(faccessat(AT_FDCWD, "dir/a", R_OK, 0), 0);
	/* faccessat2 knows AT_SYMLINK_NOFOLLOW and AT_EACCESS. */
	EXPECT(syscall(SYS_faccessat2, dir, "dangling", F_OK, AT_SYMLINK_NOFOLLOW), 0);
	EXPECT_ERR(syscall(SYS_faccessat2, dir, "dangling", F_OK, 0), ENOENT);
	EXPECT(syscall(SYS_faccessat2, dir, "file.txt", R_OK, AT_EACCESS), 0);
	EXPECT_ERR(syscall(SYS_faccessat2, dir, "file.txt", F_OK, 0x1), EINVAL);
	int fd = EXPECT(open("file.txt", O_RDONLY), 4);
	EXPECT(syscall(SYS_faccessat2, fd, "", R_OK, AT_EMPTY_PATH), 0);
	EXPECT(close(fd), 0);
	EXPECT(close(dir), 0);
	return t_done();
}
