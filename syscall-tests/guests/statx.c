/* statx: basic fields, flags and reserved-mask errors. */
#include "t.h"

int main(void)
{
	struct statx sx;
	struct stat st;
	memset(&sx, 0, sizeof sx);
	EXPECT(statx(AT_FDCWD, FIX("big.bin"), 0, STATX_BASIC_STATS, &sx), 0);
	EXPECT_TRUE((sx.stx_mask & (STATX_TYPE | STATX_MODE | STATX_SIZE | STATX_NLINK)) ==
		    (STATX_TYPE | STATX_MODE | STATX_SIZE | STATX_NLINK));
	EXPECT_TRUE(S_ISREG(sx.stx_mode));
	EXPECT(sx.stx_size, 12388);
	EXPECT(sx.stx_nlink, 1);
	EXPECT(sx.stx_mode & 07777, 0644);
	EXPECT(stat(FIX("big.bin"), &st), 0);
	EXPECT_TRUE(sx.stx_ino == st.st_ino && sx.stx_uid == st.st_uid && sx.stx_gid == st.st_gid);
	EXPECT_TRUE(sx.stx_mtime.tv_sec == st.st_mtim.tv_sec);
	EXPECT_TRUE(sx.stx_blksize == (unsigned)st.st_blksize);

	EXPECT(statx(AT_FDCWD, FIX("link_dir"), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx), 0);
	EXPECT_TRUE(S_ISLNK(sx.stx_mode) && sx.stx_size == 3);
	EXPECT(statx(AT_FDCWD, FIX("link_dir"), 0, STATX_BASIC_STATS, &sx), 0);
	EXPECT_TRUE(S_ISDIR(sx.stx_mode));

	int fd = EXPECT(open(FIX("file.txt"), O_RDONLY), 3);
	EXPECT(statx(fd, "", AT_EMPTY_PATH, STATX_SIZE, &sx), 0);
	EXPECT(sx.stx_size, 14);
	EXPECT_ERR(statx(fd, "", 0, STATX_SIZE, &sx), ENOENT);
	EXPECT(close(fd), 0);

	/* A zero mask is allowed. */
	EXPECT(statx(AT_FDCWD, "/", 0, 0, &sx), 0);
	/* Errors. */
	EXPECT_ERR(statx(AT_FDCWD, "/", 0, STATX__RESERVED, &sx), EINVAL);
	EXPECT_ERR(statx(AT_FDCWD, "/", 0x1, STATX_BASIC_STATS, &sx), EINVAL);
	EXPECT_ERR(statx(AT_FDCWD, "/", AT_STATX_FORCE_SYNC | AT_STATX_DONT_SYNC, STATX_BASIC_STATS, &sx), EINVAL);
	EXPECT_ERR(syscall(SYS_statx, AT_FDCWD, "/", 0, STATX_BASIC_STATS, BADPTR), EFAULT);
	EXPECT_ERR(statx(AT_FDCWD, "/nonexistent", 0, STATX_BASIC_STATS, &sx), ENOENT);
	EXPECT_ERR(statx(77, "rel", 0, STATX_BASIC_STATS, &sx), EBADF);
	return t_done();
}
