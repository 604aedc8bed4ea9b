/* read(2): content, EOF, zero-length reads and error cases. */
#include "t.h"

int main(void)
{
	char buf[256];
	int fd = EXPECT(open(FIX("file.txt"), O_RDONLY), 3);
	EXPECT(read(fd, buf, 5), 5);
	SHOW("first five: %.5s", buf);
	EXPECT(read(fd, buf, sizeof buf), 9);
	SHOW("rest: %.8s", buf);
	EXPECT(read(fd, buf, sizeof buf), 0);
	EXPECT(read(fd, buf, 0), 0);
	EXPECT(close(fd), 0);

	fd = EXPECT(open(FIX("file.txt"), O_RDONLY), 3);
	EXPECT_ERR(read(fd, BADPTR, 4), EFAULT);
	/* A failed read does not move the offset. */
	EXPECT(read(fd, buf, 5), 5);
	EXPECT(read(fd, NULL, 0), 0);
	EXPECT(close(fd), 0);

	EXPECT_ERR(read(3, buf, 1), EBADF);
	EXPECT_ERR(read(-1, buf, 1), EBADF);

	int d = EXPECT(open("/etc", O_RDONLY), 3);
	EXPECT_ERR(read(d, buf, sizeof buf), EISDIR);
	EXPECT(close(d), 0);

	int w = EXPECT(open("/dev/null", O_WRONLY), 3);
	EXPECT_ERR(read(w, buf, 1), EBADF);
	EXPECT(close(w), 0);

	/* A whole host file: byte count and first line. */
	static char big[65536];
	long n = t_slurp("/etc/os-release", big, sizeof big);
	struct stat st;
	EXPECT(stat("/etc/os-release", &st), 0);
	EXPECT_TRUE(n == st.st_size);
	char *nl = strchr(big, '\n');
	if (nl)
		*nl = 0;
	SHOW("os-release first line: %s", big);
	return t_done();
}
