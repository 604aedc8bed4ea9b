/* newfstatat: dirfd, AT_EMPTY_PATH, AT_SYMLINK_NOFOLLOW and bad flags. */
#include "t.h"

int main(void)
{
	struct stat st, ref;
	EXPECT(stat(FIX("file.txt"), &ref), 0);
	int dir = EXPECT(open(FIXTURES, O_RDONLY | O_DIRECTORY), 3);

	EXPECT(fstatat(dir, "file.txt", &st, 0), 0);
	EXPECT_TRUE(st.st_ino == ref.st_ino);
	EXPECT(fstatat(dir, "link_rel", &st, 0), 0);
	EXPECT_TRUE(S_ISREG(st.st_mode) && st.st_size == 14);
	EXPECT(fstatat(dir, "link_rel", &st, AT_SYMLINK_NOFOLLOW), 0);
	EXPECT_TRUE(S_ISLNK(st.st_mode) && st.st_size == 8);
	EXPECT(fstatat(dir, "dir/up", &st, 0), 0);
	EXPECT_TRUE(st.st_ino == ref.st_ino);

	/* AT_FDCWD after chdir. */
	EXPECT(chdir(FIX("dir")), 0);
	EXPECT(fstatat(AT_FDCWD, "a", &st, 0), 0);
	EXPECT(st.st_size, 2);
	EXPECT(fstatat(AT_FDCWD, "../file.txt", &st, 0), 0);
	EXPECT_TRUE(st.st_ino == ref.st_ino);

	/* AT_EMPTY_PATH: the descriptor itself, including O_PATH ones. */
	int fd = EXPECT(open(FIX("file.txt"), O_RDONLY), 4);
	EXPECT(fstatat(fd, "", &st, AT_EMPTY_PATH), 0);
	EXPECT_TRUE(st.st_ino == ref.st_ino && st.st_size == 14);
	EXPECT_ERR(fstatat(fd, "", &st, 0), ENOENT);
	EXPECT(close(fd), 0);
	fd = EXPECT(open(FIX("link_rel"), O_PATH | O_NOFOLLOW), 4);
	EXPECT(fstatat(fd, "", &st, AT_EMPTY_PATH), 0);
	EXPECT_TRUE(S_ISLNK(st.st_mode));
	EXPECT(close(fd), 0);
	EXPECT(fstatat(dir, "", &st, AT_EMPTY_PATH), 0);
	EXPECT_TRUE(S_ISDIR(st.st_mode));
	EXPECT(fstatat(AT_FDCWD, "", &st, AT_EMPTY_PATH), 0);
	EXPECT_TRUE(S_ISDIR(st.st_mode));

	/* Errors. */
	EXPECT_ERR(fstatat(dir, "file.txt", &st, 0x1), EINVAL);
	EXPECT_ERR(fstatat(dir, "file.txt", &st, 0x40000), EINVAL);
	EXPECT_ERR(fstatat(99, "file.txt", &st, 0), EBADF);
	EXPECT_ERR(fstatat(99, "", &st, AT_EMPTY_PATH), EBADF);
	EXPECT(fstatat(99, "/etc", &st, 0), 0);
	EXPECT_ERR(syscall(SYS_newfstatat, dir, "file.txt", BADPTR, 0), EFAULT);
	EXPECT_ERR(syscall(SYS_newfstatat, dir, BADPTR, &st, 0), EFAULT);
	EXPECT_ERR(fstatat(dir, "missing", &st, 0), ENOENT);
	EXPECT_ERR(fstatat(dir, "self", &st, 0), ELOOP);
	EXPECT(fstatat(dir, "self", &st, AT_SYMLINK_NOFOLLOW), 0);
	EXPECT(close(dir), 0);
	return t_done();
}
