/* ioctl on non-terminals: ENOTTY, FIONREAD, FIOCLEX/FIONCLEX. */
#include "t.h"
#include <sys/ioctl.h>
#include <termios.h>

int main(void)
{
	struct termios t;
	int n = -1;
	int fd = EXPECT(open(FIX("file.txt"), O_RDONLY), 3);
	EXPECT_ERR(ioctl(fd, TCGETS, &t), ENOTTY);
	EXPECT_ERR(ioctl(fd, TIOCGWINSZ, &t), ENOTTY);
	EXPECT_ERR(isatty(fd) ? 0 : -1, ENOTTY);
	/* FIONREAD on a regular file: bytes left before EOF. */
	EXPECT(ioctl(fd, FIONREAD, &n), 0);
	EXPECT(n, 14);
	EXPECT(lseek(fd, 10, SEEK_SET), 10);
	EXPECT(ioctl(fd, FIONREAD, &n), 0);
	EXPECT(n, 4);
	EXPECT_ERR(ioctl(fd, FIONREAD, BADPTR), EFAULT);
	EXPECT(ioctl(fd, FIOCLEX), 0);
	EXPECT(fcntl(fd, F_GETFD), FD_CLOEXEC);
	EXPECT(ioctl(fd, FIONCLEX), 0);
	EXPECT(fcntl(fd, F_GETFD), 0);
	EXPECT_ERR(ioctl(fd, 0x5401ff, 0), ENOTTY);
	EXPECT(close(fd), 0);

	int null = EXPECT(open("/dev/null", O_RDWR), 3);
	EXPECT_ERR(ioctl(null, TCGETS, &t), ENOTTY);
	EXPECT(close(null), 0);
	int dir = EXPECT(open("/etc", O_RDONLY), 3);
	EXPECT_ERR(ioctl(dir, TCGETS, &t), ENOTTY);
	EXPECT(close(dir), 0);
	EXPECT_ERR(ioctl(99, TCGETS, &t), EBADF);
	/* The harness gives stdin as /dev/null in both runs. */
	EXPECT_ERR(ioctl(0, TCGETS, &t), ENOTTY);
	return t_done();
}
