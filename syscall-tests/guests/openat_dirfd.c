/* openat relative to a directory descriptor, AT_FDCWD, and dirfd errors. */
#include "t.h"

int main(void)
{
	char buf[64];
	int etc = EXPECT(open("/etc", O_RDONLY | O_DIRECTORY), 3);
	int fd = EXPECT(openat(etc, "passwd", O_RDONLY), 4);
	EXPECT_OK(read(fd, buf, 5));
	EXPECT(close(fd), 0);

	/* An absolute path ignores dirfd, even an invalid one. */
	EXPECT(openat(9999, "/etc/passwd", O_RDONLY), 4);
	EXPECT(close(4), 0);

	/* Relative path with a bad or non-directory dirfd. */
	EXPECT_ERR(openat(9999, "passwd", O_RDONLY), EBADF);
	EXPECT_ERR(openat(-5, "passwd", O_RDONLY), EBADF);
	fd = EXPECT(open("/etc/passwd", O_RDONLY), 4);
	EXPECT_ERR(openat(fd, "x", O_RDONLY), ENOTDIR);
	EXPECT(close(fd), 0);

	/* A directory opened with O_PATH is a fine dirfd. */
	int usr = EXPECT(open("/usr", O_PATH | O_DIRECTORY), 4);
	fd = EXPECT(openat(usr, "lib/os-release", O_RDONLY), 5);
	EXPECT(close(fd), 0);
	EXPECT(openat(usr, "..", O_RDONLY | O_DIRECTORY), 5);
	EXPECT(close(5), 0);

	/* AT_FDCWD follows chdir. */
	EXPECT(chdir("/etc"), 0);
	EXPECT(openat(AT_FDCWD, "passwd", O_RDONLY), 5);
	EXPECT(close(5), 0);
	EXPECT(open("./passwd", O_RDONLY), 5);
	EXPECT(close(5), 0);
	EXPECT(openat(AT_FDCWD, "../etc/./passwd", O_RDONLY), 5);
	EXPECT(close(5), 0);
	EXPECT_ERR(openat(AT_FDCWD, "missing", O_RDONLY), ENOENT);

	/* openat on dirfd with ".." climbs out of it. */
	EXPECT(openat(etc, "../usr/lib/os-release", O_RDONLY), 5);
	EXPECT(close(5), 0);
	EXPECT(close(usr), 0);
	EXPECT(close(etc), 0);
	return t_done();
}
