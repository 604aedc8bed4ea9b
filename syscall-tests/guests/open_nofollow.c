/* O_NOFOLLOW applies to the last component only. */
#include "t.h"

int main(void)
{
	EXPECT_ERR(open(FIX("link_rel"), O_RDONLY | O_NOFOLLOW), ELOOP);
	EXPECT_ERR(open(FIX("link_abs"), O_RDONLY | O_NOFOLLOW), ELOOP);
	EXPECT_ERR(open(FIX("dangling"), O_RDONLY | O_NOFOLLOW), ELOOP);
	EXPECT_ERR(open("/bin/sh", O_RDONLY | O_NOFOLLOW), ELOOP);
	/* Intermediate symlinks are followed: /bin -> usr/bin. */
	EXPECT(open("/bin/echo", O_RDONLY | O_NOFOLLOW), 3);
	EXPECT(close(3), 0);
	EXPECT(open(FIX("link_dir/a"), O_RDONLY | O_NOFOLLOW), 3);
	EXPECT(close(3), 0);
	/* Plain file: no effect. */
	EXPECT(open(FIX("file.txt"), O_RDONLY | O_NOFOLLOW), 3);
	EXPECT(close(3), 0);
	/* O_PATH|O_NOFOLLOW opens the link itself. */
	int fd = EXPECT(open(FIX("link_rel"), O_PATH | O_NOFOLLOW), 3);
	struct stat st;
	EXPECT(fstat(fd, &st), 0);
	EXPECT_TRUE(S_ISLNK(st.st_mode));
	EXPECT(close(fd), 0);
	/* O_NOFOLLOW|O_DIRECTORY on a symlink to a directory: Linux checks O_DIRECTORY first. */
	EXPECT_ERR(open(FIX("link_dir"), O_RDONLY | O_DIRECTORY | O_NOFOLLOW), ENOTDIR);
	EXPECT(open(FIX("link_dir"), O_RDONLY | O_DIRECTORY), 3);
	EXPECT(close(3), 0);
	return t_done();
}
