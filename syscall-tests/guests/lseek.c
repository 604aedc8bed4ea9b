/* lseek whence values, offsets past EOF and invalid arguments. */
#include "t.h"

int main(void)
{
	char buf[32];
	int fd = EXPECT(open(FIX("file.txt"), O_RDONLY), 3);
	EXPECT(lseek(fd, 0, SEEK_END), 14);
	EXPECT(lseek(fd, -4, SEEK_END), 10);
	EXPECT(read(fd, buf, 32), 4);
	SHOW("tail: %.3s", buf);
	EXPECT(lseek(fd, 2, SEEK_SET), 2);
	EXPECT(lseek(fd, 3, SEEK_CUR), 5);
	EXPECT(lseek(fd, -1, SEEK_CUR), 4);
	EXPECT(read(fd, buf, 1), 1);
	SHOW("byte 4: %c", buf[0]);
	/* Past EOF is allowed; reading there returns 0. */
	EXPECT(lseek(fd, 1000, SEEK_SET), 1000);
	EXPECT(read(fd, buf, 1), 0);
	/* Negative results and bad whence. */
	EXPECT_ERR(lseek(fd, -1, SEEK_SET), EINVAL);
	EXPECT_ERR(lseek(fd, -100, SEEK_END), EINVAL);
	EXPECT(lseek(fd, 0, SEEK_SET), 0);
	EXPECT_ERR(lseek(fd, -1, SEEK_CUR), EINVAL);
	EXPECT_ERR(lseek(fd, 0, 42), EINVAL);
	/* The failed seeks left the offset alone. */
	EXPECT(lseek(fd, 0, SEEK_CUR), 0);
	EXPECT(lseek(fd, 0, SEEK_DATA), 0);
	EXPECT(lseek(fd, 0, SEEK_HOLE), 14);
	EXPECT_ERR(lseek(fd, 20, SEEK_DATA), ENXIO);
	EXPECT(close(fd), 0);
	EXPECT_ERR(lseek(fd, 0, SEEK_SET), EBADF);

	/* Directories can be rewound. */
	fd = EXPECT(open("/etc", O_RDONLY | O_DIRECTORY), 3);
	EXPECT(lseek(fd, 0, SEEK_SET), 0);
	EXPECT(close(fd), 0);
	/* /dev/null accepts any seek and reports 0. */
	fd = EXPECT(open("/dev/null", O_RDONLY), 3);
	EXPECT(lseek(fd, 123, SEEK_SET), 0);
	EXPECT(close(fd), 0);
	return t_done();
}
