/* mkdir/rmdir/mknod on the read-only root: EROFS unless another error wins. */
#include "t.h"

int main(void)
{
	t_require_readonly();
	EXPECT_ERR(mkdir(FIX("newdir"), 0755), EROFS);
	EXPECT_ERR(mkdir("/newdir-at-root", 0755), EROFS);
	EXPECT_ERR(mkdirat(AT_FDCWD, FIX("newdir"), 0755), EROFS);
	/* An existing name is reported before the read-only mount. */
	EXPECT_ERR(mkdir(FIX("dir"), 0755), EEXIST);
	EXPECT_ERR(mkdir(FIX("file.txt"), 0755), EEXIST);
	EXPECT_ERR(mkdir(FIX("no-dir/x"), 0755), ENOENT);
	EXPECT_ERR(mkdir(FIX("file.txt/x"), 0755), ENOTDIR);
	EXPECT_ERR(rmdir(FIX("dir/sub")), EROFS);
	EXPECT_ERR(rmdir(FIX("dir")), EROFS);
	EXPECT_ERR(rmdir(FIX("no-such")), EROFS);
	EXPECT_ERR(rmdir(FIX("no-dir/x")), ENOENT);
	EXPECT_ERR(mknod(FIX("fifo"), S_IFIFO | 0644, 0), EROFS);
	EXPECT_ERR(mkfifo(FIX("fifo"), 0644), EROFS);
	EXPECT_ERR(mknod(FIX("file.txt"), S_IFIFO | 0644, 0), EEXIST);
	struct stat st;
	EXPECT(stat(FIX("dir/sub"), &st), 0);
	EXPECT_ERR(stat(FIX("newdir"), &st), ENOENT);
	return t_done();
}
