/* pread64/preadv/readv: positioned and scattered reads. */
#include "t.h"
#include <sys/uio.h>

int main(void)
{
	char buf[64] = {0};
	int fd = EXPECT(open(FIX("file.txt"), O_RDONLY), 3);
	EXPECT(pread(fd, buf, 7, 6), 7);
	SHOW("pread at 6: %.7s", buf);
	/* pread does not move the file offset. */
	EXPECT(lseek(fd, 0, SEEK_CUR), 0);
	EXPECT(pread(fd, buf, 10, 100), 0);
	EXPECT_ERR(pread(fd, buf, 1, -1), EINVAL);
	EXPECT_ERR(pread(fd, BADPTR, 1, 0), EFAULT);

	char a[3], b[4], c[20];
	struct iovec iov[3] = {{a, 3}, {b, 4}, {c, sizeof c}};
	EXPECT(readv(fd, iov, 3), 14);
	SHOW("readv: [%.3s] [%.4s] [%.6s]", a, b, c);
	EXPECT(lseek(fd, 0, SEEK_CUR), 14);
	EXPECT(readv(fd, iov, 3), 0);

	EXPECT(preadv(fd, iov, 2, 1), 7);
	SHOW("preadv at 1: [%.3s] [%.4s]", a, b);
	EXPECT(lseek(fd, 0, SEEK_CUR), 14);

	/* iovec errors */
	EXPECT_ERR(syscall(SYS_readv, fd, iov, -1), EINVAL);
	EXPECT_ERR(syscall(SYS_readv, fd, iov, 1025), EINVAL);
	EXPECT(readv(fd, iov, 0), 0);
	EXPECT_ERR(syscall(SYS_readv, fd, BADPTR, 1), EFAULT);
	EXPECT(lseek(fd, 0, SEEK_SET), 0);
	struct iovec badbase[2] = {{a, 3}, {BADPTR, 4}};
	/* A partial transfer counts as success: the first buffer is filled. */
	EXPECT(readv(fd, badbase, 2), 3);
	struct iovec allbad[1] = {{BADPTR, 4}};
	EXPECT_ERR(readv(fd, allbad, 1), EFAULT);
	/* Zero-length entries are skipped. */
	EXPECT(lseek(fd, 0, SEEK_SET), 0);
	struct iovec zero[3] = {{a, 0}, {BADPTR, 0}, {b, 4}};
	EXPECT(readv(fd, zero, 3), 4);
	SHOW("after zero-length iovecs: %.4s", b);

	EXPECT_ERR(pread(99, buf, 1, 0), EBADF);
	EXPECT(close(fd), 0);
	return t_done();
}
