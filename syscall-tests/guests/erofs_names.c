/* unlink/rename/symlink/link on the read-only root. */
#include "t.h"

int main(void)
{
	t_require_readonly();
	EXPECT_ERR(unlink(FIX("file.txt")), EROFS);
	EXPECT_ERR(unlink(FIX("link_rel")), EROFS);
	/* unlink asks for write access to the mount before looking up. */
	EXPECT_ERR(unlink(FIX("no-such")), EROFS);
	EXPECT_ERR(unlink(FIX("dir")), EROFS);
	EXPECT_ERR(unlink(FIX("no-dir/x")), ENOENT);
	EXPECT_ERR(unlinkat(AT_FDCWD, FIX("dir/sub"), AT_REMOVEDIR), EROFS);
	EXPECT_ERR(unlinkat(AT_FDCWD, FIX("file.txt"), 0x1), EINVAL);

	EXPECT_ERR(rename(FIX("file.txt"), FIX("renamed")), EROFS);
	EXPECT_ERR(rename(FIX("no-such"), FIX("renamed")), EROFS);
	EXPECT_ERR(rename(FIX("dir"), FIX("dir2")), EROFS);
	EXPECT_ERR(renameat2(AT_FDCWD, FIX("file.txt"), AT_FDCWD, FIX("empty"), RENAME_NOREPLACE), EROFS);
	EXPECT_ERR(renameat2(AT_FDCWD, FIX("file.txt"), AT_FDCWD, FIX("empty"), RENAME_NOREPLACE | RENAME_EXCHANGE), EINVAL);
	EXPECT_ERR(rename(FIX("no-dir/a"), FIX("b")), ENOENT);
	/* Across mounts the read-only source is reported first. */
	EXPECT_ERR(rename(FIX("file.txt"), "/dev/ferrovisor-test"), EXDEV);

	EXPECT_ERR(symlink("file.txt", FIX("newlink")), EROFS);
	EXPECT_ERR(symlink("file.txt", FIX("link_rel")), EEXIST);
	EXPECT_ERR(symlink("file.txt", FIX("no-dir/l")), ENOENT);
	EXPECT_ERR(link(FIX("file.txt"), FIX("hardlink")), EROFS);
	EXPECT_ERR(link(FIX("file.txt"), FIX("empty")), EEXIST);
	EXPECT_ERR(link(FIX("no-such"), FIX("hardlink")), ENOENT);

	/* Everything is still there. */
	struct stat st;
	EXPECT(stat(FIX("file.txt"), &st), 0);
	EXPECT(lstat(FIX("link_rel"), &st), 0);
	EXPECT_ERR(lstat(FIX("renamed"), &st), ENOENT);
	return t_done();
}
