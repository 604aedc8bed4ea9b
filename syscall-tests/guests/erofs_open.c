/* Opening for write on the read-only root: EROFS, and which errors win.
 * Native side: the harness remounts / read-only in a private namespace. */
#include "t.h"

int main(void)
{
	t_require_readonly();
	EXPECT_ERR(open(FIX("new-file"), O_CREAT | O_WRONLY, 0644), EROFS);
	EXPECT_ERR(open("/new-file-at-root", O_CREAT | O_WRONLY, 0644), EROFS);
	EXPECT_ERR(open(FIX("new-file"), O_CREAT | O_RDONLY, 0644), EROFS);
	EXPECT_ERR(creat(FIX("new-file"), 0644), EROFS);
	EXPECT_ERR(open(FIX("file.txt"), O_WRONLY), EROFS);
	EXPECT_ERR(open(FIX("file.txt"), O_RDWR), EROFS);
	EXPECT_ERR(open(FIX("file.txt"), O_RDONLY | O_TRUNC), EROFS);
	EXPECT_ERR(open(FIX("link_rel"), O_WRONLY | O_APPEND), EROFS);
	EXPECT_ERR(openat(AT_FDCWD, "/etc/passwd", O_RDWR), EROFS);
	/* O_CREAT on an existing file without write access needs no write. */
	EXPECT(open(FIX("file.txt"), O_CREAT | O_RDONLY, 0644), 3);
	EXPECT(close(3), 0);
	EXPECT_ERR(open(FIX("file.txt"), O_CREAT | O_EXCL | O_RDONLY, 0644), EEXIST);
	/* Lookup errors come before EROFS. */
	EXPECT_ERR(open(FIX("no-dir/new-file"), O_CREAT | O_WRONLY, 0644), ENOENT);
	EXPECT_ERR(open(FIX("file.txt/new"), O_CREAT | O_WRONLY, 0644), ENOTDIR);
	EXPECT_ERR(open(FIX("dir"), O_WRONLY), EISDIR);
	EXPECT_ERR(open(FIX("dir"), O_CREAT | O_RDONLY, 0644), EISDIR);
	EXPECT_ERR(open(FIX("dangling"), O_CREAT | O_WRONLY, 0644), EROFS);
	/* O_TMPFILE needs a writable directory. */
	EXPECT_ERR(open(FIXTURES, O_TMPFILE | O_RDWR, 0600), EROFS);
	/* Other mounts are writable: /dev/null. */
	EXPECT(open("/dev/null", O_WRONLY), 3);
	EXPECT(write(3, "x", 1), 1);
	EXPECT(close(3), 0);
	/* Write on a read-only descriptor. */
	EXPECT(open(FIX("file.txt"), O_RDONLY), 3);
	EXPECT_ERR(write(3, "x", 1), EBADF);
	EXPECT(close(3), 0);
	return t_done();
}
