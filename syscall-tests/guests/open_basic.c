/* open/close: success, lowest free descriptor, and the common failures. */
#include "t.h"

int main(void)
{
	EXPECT(open("/etc/passwd", O_RDONLY), 3);
	EXPECT(open("/etc/passwd", O_RDONLY), 4);
	EXPECT(close(3), 0);
	/* The lowest free number is reused. */
	EXPECT(open("/etc/passwd", O_RDONLY), 3);
	EXPECT(close(3), 0);
	EXPECT(close(4), 0);
	EXPECT_ERR(close(3), EBADF);
	EXPECT_ERR(close(-1), EBADF);
	EXPECT_ERR(close(100000), EBADF);

	EXPECT_ERR(open("/etc/does-not-exist", O_RDONLY), ENOENT);
	EXPECT_ERR(open("/no-such-dir/passwd", O_RDONLY), ENOENT);
	EXPECT_ERR(open("/etc/passwd/child", O_RDONLY), ENOTDIR);
	EXPECT_ERR(syscall(SYS_open, BADPTR, O_RDONLY), EFAULT);
	EXPECT_ERR(syscall(SYS_openat, AT_FDCWD, BADPTR, O_RDONLY), EFAULT);
	EXPECT_ERR(syscall(SYS_open, NULL, O_RDONLY), EFAULT);

	/* O_DIRECTORY */
	EXPECT_ERR(open("/etc/passwd", O_RDONLY | O_DIRECTORY), ENOTDIR);
	EXPECT(open("/etc", O_RDONLY | O_DIRECTORY), 3);
	EXPECT(close(3), 0);
	EXPECT(open("/etc", O_RDONLY), 3);
	EXPECT(close(3), 0);

	/* O_PATH descriptors cannot be read. */
	int fd = EXPECT(open("/etc/passwd", O_PATH), 3);
	char c;
	EXPECT_ERR(read(fd, &c, 1), EBADF);
	EXPECT(close(fd), 0);

	/* O_CLOEXEC is visible through F_GETFD. */
	fd = EXPECT(open("/etc/passwd", O_RDONLY | O_CLOEXEC), 3);
	EXPECT(fcntl(fd, F_GETFD), FD_CLOEXEC);
	EXPECT(close(fd), 0);

	/* creat-less open of a directory for reading is fine, O_DIRECTORY|O_PATH too. */
	EXPECT(open("/", O_RDONLY | O_DIRECTORY | O_PATH), 3);
	EXPECT(close(3), 0);
	return t_done();
}
