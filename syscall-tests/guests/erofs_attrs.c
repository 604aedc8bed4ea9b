/* chmod/chown/truncate/utimensat/xattrs on the read-only root, and W_OK. */
#include "t.h"
#include <sys/xattr.h>

int main(void)
{
	t_require_readonly();
	EXPECT_ERR(chmod(FIX("file.txt"), 0600), EROFS);
	EXPECT_ERR(chmod(FIX("dir"), 0700), EROFS);
	EXPECT_ERR(chmod(FIX("no-such"), 0600), ENOENT);
	EXPECT_ERR(fchmodat(AT_FDCWD, FIX("link_rel"), 0600, 0), EROFS);
	EXPECT_ERR(chown(FIX("file.txt"), 0, 0), EROFS);
	EXPECT_ERR(lchown(FIX("link_rel"), 0, 0), EROFS);
	EXPECT_ERR(truncate(FIX("file.txt"), 0), EROFS);
	EXPECT_ERR(truncate(FIX("dir"), 0), EISDIR);
	EXPECT_ERR(truncate(FIX("no-such"), 0), ENOENT);
	EXPECT_ERR(truncate(FIX("file.txt"), -1), EINVAL);
	EXPECT_ERR(utimensat(AT_FDCWD, FIX("file.txt"), NULL, 0), EROFS);
	EXPECT_ERR(setxattr(FIX("file.txt"), "user.test", "v", 1, 0), EROFS);

	int fd = EXPECT(open(FIX("file.txt"), O_RDONLY), 3);
	EXPECT_ERR(fchmod(fd, 0600), EROFS);
	EXPECT_ERR(fchown(fd, 0, 0), EROFS);
	/* ftruncate needs a writable descriptor before anything else. */
	EXPECT_ERR(ftruncate(fd, 0), EINVAL);
	EXPECT_ERR(futimens(fd, NULL), EROFS);
	EXPECT(close(fd), 0);

	EXPECT_ERR(access(FIX("file.txt"), W_OK), EROFS);
	EXPECT_ERR(access("/etc/passwd", R_OK | W_OK), EROFS);
	EXPECT_ERR(access("/", W_OK), EROFS);
	EXPECT(access(FIX("file.txt"), R_OK), 0);
	EXPECT(access("/dev/null", W_OK), 0);

	struct stat st;
	EXPECT(stat(FIX("file.txt"), &st), 0);
	EXPECT(st.st_mode & 07777, 0644);
	EXPECT(st.st_size, 14);
	return t_done();
}
