/* /dev/null, /dev/zero, /dev/full, /dev/urandom, /dev/random. */
#include "t.h"
#include <sys/sysmacros.h>

static void dev(const char *path)
{
	struct stat st;
	if (stat(path, &st) == 0)
		SHOW("%s: chr=%d major=%u minor=%u", path, S_ISCHR(st.st_mode),
		     major(st.st_rdev), minor(st.st_rdev));
	else
		SHOW("%s: errno=%s", path, errname(errno));
}

int main(void)
{
	char buf[128];
	dev("/dev/null");
	dev("/dev/zero");
	dev("/dev/full");
	dev("/dev/urandom");
	dev("/dev/random");

	int fd = EXPECT(open("/dev/null", O_RDWR), 3);
	EXPECT(read(fd, buf, sizeof buf), 0);
	EXPECT(write(fd, "hello", 5), 5);
	EXPECT(write(fd, buf, 0), 0);
	EXPECT(close(fd), 0);

	fd = EXPECT(open("/dev/zero", O_RDWR), 3);
	memset(buf, 0x55, sizeof buf);
	EXPECT(read(fd, buf, 100), 100);
	int zeros = 1;
	for (int i = 0; i < 100; i++)
		zeros &= buf[i] == 0;
	EXPECT_TRUE(zeros && buf[100] == 0x55);
	EXPECT(write(fd, buf, 7), 7);
	EXPECT_ERR(read(fd, BADPTR, 10), EFAULT);
	EXPECT(close(fd), 0);

	fd = EXPECT(open("/dev/full", O_RDWR), 3);
	EXPECT_ERR(write(fd, "x", 1), ENOSPC);
	EXPECT(read(fd, buf, 16), 16);
	EXPECT_TRUE(buf[0] == 0 && buf[15] == 0);
	EXPECT(close(fd), 0);

	fd = EXPECT(open("/dev/urandom", O_RDONLY), 3);
	EXPECT(read(fd, buf, 64), 64);
	EXPECT(read(fd, buf, 0), 0);
	EXPECT(close(fd), 0);
	fd = EXPECT(open("/dev/random", O_RDONLY), 3);
	EXPECT(read(fd, buf, 16), 16);
	EXPECT(close(fd), 0);

	EXPECT_ERR(open("/dev/does-not-exist", O_RDONLY), ENOENT);
	return t_done();
}
