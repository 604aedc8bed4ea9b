/* dup2, dup3 and close_range: lowest-free numbering, flags, same-fd cases,
 * CLOSE_RANGE_CLOEXEC and CLOSE_RANGE_UNSHARE, and errors. */
#include "t.h"
#include <linux/close_range.h>

static int is_open(int fd) { return fcntl(fd, F_GETFD) >= 0; }

int main(void)
{
	int fd = EXPECT(open("/etc/passwd", O_RDONLY), 3);
	/* dup2 onto itself is a no-op returning the fd; dup3 onto itself is
	 * EINVAL. */
	EXPECT(dup2(fd, fd), 3);
	EXPECT_ERR(dup3(fd, fd, 0), EINVAL);
	EXPECT_ERR(dup2(99, 10), EBADF);
	EXPECT_ERR(dup2(fd, -1), EBADF);
	EXPECT_ERR(dup3(fd, 10, O_RDONLY | 0x4), EINVAL);
	/* dup2 clears FD_CLOEXEC; dup3 can set it. */
	EXPECT(fcntl(fd, F_SETFD, FD_CLOEXEC), 0);
	EXPECT(dup2(fd, 10), 10);
	EXPECT(fcntl(10, F_GETFD), 0);
	EXPECT(dup3(fd, 11, O_CLOEXEC), 11);
	EXPECT(fcntl(11, F_GETFD), FD_CLOEXEC);
	/* dup2 over an open fd closes it silently; both share the offset. */
	char b[4];
	EXPECT(dup2(fd, 11), 11);
	EXPECT(fcntl(11, F_GETFD), 0);
	EXPECT(read(11, b, 4), 4);
	EXPECT(lseek(fd, 0, SEEK_CUR), 4);
	/* dup takes the lowest free. */
	EXPECT(dup(fd), 4);
	EXPECT(fcntl(fd, F_DUPFD, 20), 20);
	EXPECT(fcntl(fd, F_DUPFD_CLOEXEC, 20), 21);
	EXPECT(fcntl(21, F_GETFD), FD_CLOEXEC);
	for (int i = 30; i < 40; i++)
		EXPECT(dup2(fd, i), i);

	/* close_range: mark 30..34 close-on-exec, close 35..39, then
	 * everything from 20 up. */
	EXPECT(syscall(SYS_close_range, 30, 34, CLOSE_RANGE_CLOEXEC), 0);
	EXPECT(fcntl(30, F_GETFD), FD_CLOEXEC);
	EXPECT(fcntl(34, F_GETFD), FD_CLOEXEC);
	EXPECT(fcntl(35, F_GETFD), 0);
	EXPECT(syscall(SYS_close_range, 35, 39, 0), 0);
	EXPECT(is_open(34) * 10 + is_open(35) + is_open(39), 10);
	EXPECT(syscall(SYS_close_range, 20, ~0U, 0), 0);
	EXPECT(is_open(20) + is_open(21) + is_open(30), 0);
	EXPECT(is_open(11), 1);
	/* A range with no open fds is fine; first > last is EINVAL; unknown
	 * flags EINVAL. */
	EXPECT(syscall(SYS_close_range, 500, 600, 0), 0);
	EXPECT_ERR(syscall(SYS_close_range, 10, 5, 0), EINVAL);
	EXPECT_ERR(syscall(SYS_close_range, 5, 10, 0x80), EINVAL);
	/* CLOSE_RANGE_UNSHARE. */
	EXPECT(syscall(SYS_close_range, 10, 11, CLOSE_RANGE_UNSHARE), 0);
	EXPECT(is_open(10) + is_open(11), 0);
	EXPECT(is_open(3) + is_open(4), 2);
	/* Standard descriptors can be replaced too. */
	EXPECT(dup2(fd, 0), 0);
	EXPECT(lseek(0, 0, SEEK_CUR), 4);
	return t_done();
}
