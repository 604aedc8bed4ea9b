/* fcntl: descriptor flags, status flags, F_DUPFD* and errors. */
#include "t.h"

int main(void)
{
	int fd = EXPECT(open(FIX("file.txt"), O_RDONLY), 3);
	EXPECT(fcntl(fd, F_GETFD), 0);
	EXPECT(fcntl(fd, F_SETFD, FD_CLOEXEC), 0);
	EXPECT(fcntl(fd, F_GETFD), FD_CLOEXEC);
	EXPECT(fcntl(fd, F_SETFD, 0), 0);
	EXPECT(fcntl(fd, F_GETFD), 0);

	/* On x86-64 the kernel always adds O_LARGEFILE (0100000). */
	SHOW("F_GETFL rdonly: %#o", fcntl(fd, F_GETFL));
	EXPECT(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	EXPECT(fcntl(fd, F_SETFL, O_NONBLOCK | O_APPEND), 0);
	SHOW("F_GETFL after setfl: %#o", fcntl(fd, F_GETFL));
	/* Access mode bits cannot be changed through F_SETFL. */
	EXPECT(fcntl(fd, F_SETFL, O_RDWR), 0);
	EXPECT(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	/* F_SETFL replaces the changeable flags: O_NONBLOCK is gone now. */
	EXPECT(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	EXPECT(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	int w = EXPECT(open("/dev/null", O_WRONLY | O_APPEND), 4);
	SHOW("F_GETFL wronly|append: %#o", fcntl(w, F_GETFL));
	EXPECT(close(w), 0);
	int p = EXPECT(open("/etc", O_PATH), 4);
	SHOW("F_GETFL O_PATH: %#o", fcntl(p, F_GETFL));
	EXPECT(close(p), 0);

	/* F_DUPFD picks the lowest free number >= arg. */
	EXPECT(fcntl(fd, F_DUPFD, 0), 4);
	EXPECT(fcntl(fd, F_DUPFD, 10), 10);
	EXPECT(fcntl(fd, F_DUPFD, 10), 11);
	EXPECT(fcntl(11, F_GETFD), 0);
	EXPECT(fcntl(fd, F_DUPFD_CLOEXEC, 10), 12);
	EXPECT(fcntl(12, F_GETFD), FD_CLOEXEC);
	EXPECT_ERR(fcntl(fd, F_DUPFD, -1), EINVAL);
	EXPECT_ERR(fcntl(fd, F_DUPFD, 1 << 30), EINVAL);
	/* The descriptor flags are per descriptor, status flags are shared. */
	EXPECT(fcntl(fd, F_SETFD, FD_CLOEXEC), 0);
	EXPECT(fcntl(10, F_GETFD), 0);
	EXPECT(fcntl(10, F_GETFL) & O_NONBLOCK, O_NONBLOCK);

	EXPECT_ERR(fcntl(99, F_GETFD), EBADF);
	EXPECT_ERR(fcntl(99, F_GETFL), EBADF);
	EXPECT_ERR(fcntl(fd, 9999), EINVAL);
	EXPECT(fcntl(fd, F_GETOWN), 0);
	return t_done();
}
