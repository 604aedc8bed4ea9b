/* dup/dup2/dup3: numbering, shared offsets, close-on-exec and errors. */
#include "t.h"

int main(void)
{
	char c[4];
	int fd = EXPECT(open(FIX("file.txt"), O_RDONLY), 3);
	int d = EXPECT(dup(fd), 4);
	/* Duplicates share one open file description, hence one offset. */
	EXPECT(read(fd, c, 2), 2);
	EXPECT(lseek(d, 0, SEEK_CUR), 2);
	EXPECT(read(d, c, 3), 3);
	SHOW("read via dup: %.3s", c);
	EXPECT(lseek(fd, 0, SEEK_CUR), 5);

	EXPECT(dup2(fd, 10), 10);
	EXPECT(fcntl(10, F_GETFD), 0);
	EXPECT(dup2(fd, fd), 3);
	EXPECT(dup2(10, 4), 4);
	EXPECT_ERR(dup2(99, 11), EBADF);
	EXPECT_ERR(dup2(fd, -1), EBADF);
	EXPECT_ERR(dup2(fd, 1 << 30), EBADF);
	EXPECT_ERR(dup(99), EBADF);
	EXPECT_ERR(dup(-1), EBADF);

	/* dup3: O_CLOEXEC only, and never the same number. */
	EXPECT(dup3(fd, 12, O_CLOEXEC), 12);
	EXPECT(fcntl(12, F_GETFD), FD_CLOEXEC);
	EXPECT(dup3(fd, 12, 0), 12);
	EXPECT(fcntl(12, F_GETFD), 0);
	EXPECT_ERR(dup3(fd, fd, 0), EINVAL);
	EXPECT_ERR(dup3(fd, 13, O_NONBLOCK), EINVAL);
	EXPECT_ERR(dup3(99, 13, 0), EBADF);
	EXPECT_ERR(fcntl(13, F_GETFD), EBADF);

	/* dup2 over an open descriptor closes it silently. */
	int other = EXPECT(open("/etc/passwd", O_RDONLY), 5);
	EXPECT(dup2(fd, other), 5);
	EXPECT(lseek(other, 0, SEEK_CUR), 5);
	/* The lowest free slot after closes. */
	EXPECT(close(4), 0);
	EXPECT(dup(fd), 4);
	EXPECT(dup(0), 6);
	EXPECT(close(fd), 0);
	/* The description lives on through its duplicates. */
	EXPECT(read(10, c, 4), 4);
	SHOW("after close of original: %.4s", c);
	return t_done();
}
