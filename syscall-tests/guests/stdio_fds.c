/* The standard descriptors the harness hands over: stdin /dev/null, stdout
 * and stderr pipes. Writes, vectors, and pipe-specific errors. */
#include "t.h"
#include <sys/uio.h>

int main(void)
{
	struct stat st;
	EXPECT(fstat(0, &st), 0);
	EXPECT_TRUE(S_ISCHR(st.st_mode));
	EXPECT(fstat(1, &st), 0);
	EXPECT_TRUE(S_ISFIFO(st.st_mode));
	EXPECT(fcntl(1, F_GETFL) & O_ACCMODE, O_WRONLY);
	char c;
	EXPECT(read(0, &c, 1), 0);
	fflush(stdout);
	EXPECT(write(1, "raw write\n", 10), 10);
	struct iovec iov[3] = {{"wri", 3}, {"tev", 3}, {"\n", 1}};
	EXPECT(writev(1, iov, 3), 7);
	EXPECT(write(2, "to stderr\n", 10), 10);
	EXPECT_ERR(write(1, BADPTR, 10), EFAULT);
	EXPECT(write(1, NULL, 0), 0);
	EXPECT_ERR(lseek(1, 0, SEEK_CUR), ESPIPE);
	EXPECT_ERR(pwrite(1, "x", 1, 0), ESPIPE);
	EXPECT_ERR(write(99, "x", 1), EBADF);
	int d = EXPECT(dup(1), 3);
	EXPECT(write(d, "via dup\n", 8), 8);
	EXPECT(close(d), 0);
	/* Closing stdin and reopening gets descriptor 0 back. */
	EXPECT(close(0), 0);
	EXPECT(open("/dev/null", O_RDONLY), 0);
	return t_done();
}
