/* stat/lstat/fstat: file types, sizes, link sizes and errors. */
#include "t.h"

static const char *kind(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFREG: return "reg";
	case S_IFDIR: return "dir";
	case S_IFLNK: return "lnk";
	case S_IFCHR: return "chr";
	case S_IFBLK: return "blk";
	case S_IFIFO: return "fifo";
	case S_IFSOCK: return "sock";
	}
	return "?";
}

static void show(const char *path)
{
	struct stat st, lst;
	int r = stat(path, &st);
	int lr = lstat(path, &lst);
	if (r == 0)
		SHOW("stat %s: %s size=%lld perm=%o", path, kind(st.st_mode),
		     S_ISDIR(st.st_mode) ? 0LL : (long long)st.st_size,
		     (unsigned)(st.st_mode & 07777));
	else
		SHOW("stat %s: errno=%s", path, errname(errno));
	if (lr == 0)
		SHOW("lstat %s: %s%s", path, kind(lst.st_mode),
		     S_ISLNK(lst.st_mode) ? "" : " (same as stat)");
}

int main(void)
{
	show(FIX("file.txt"));
	show(FIX("empty"));
	show(FIX("big.bin"));
	show(FIX("dir"));
	show(FIX("link_rel"));
	show(FIX("link_dir"));
	show(FIX("notelf"));
	show("/etc/os-release");
	show("/bin");
	show("/bin/echo");

	struct stat st, st2;
	/* A symlink's size is the length of its target. */
	EXPECT(lstat("/bin", &st), 0);
	EXPECT(st.st_size, 7);
	EXPECT(lstat(FIX("link_dotdot"), &st), 0);
	EXPECT(st.st_size, 15);

	/* Two names of one file: same inode and device. */
	EXPECT(stat("/etc/os-release", &st), 0);
	EXPECT(stat("/usr/lib/os-release", &st2), 0);
	EXPECT_TRUE(st.st_ino == st2.st_ino && st.st_dev == st2.st_dev);
	EXPECT(stat(FIX("file.txt"), &st), 0);
	EXPECT(stat(FIX("link_abs"), &st2), 0);
	EXPECT_TRUE(st.st_ino == st2.st_ino && st.st_dev == st2.st_dev);
	EXPECT_TRUE(st.st_nlink == 1);
	EXPECT(stat(FIX("dir/sub"), &st), 0);
	EXPECT_TRUE(st.st_nlink == 2);
	EXPECT(stat(FIX("dir"), &st), 0);
	EXPECT_TRUE(st.st_nlink == 3);
	EXPECT_TRUE(st.st_blksize > 0);

	/* fstat agrees with stat. */
	int fd = EXPECT(open(FIX("big.bin"), O_RDONLY), 3);
	EXPECT(fstat(fd, &st), 0);
	EXPECT(stat(FIX("big.bin"), &st2), 0);
	EXPECT(st.st_size, 12388);
	EXPECT_TRUE(st.st_ino == st2.st_ino && st.st_mode == st2.st_mode);
	EXPECT_TRUE(st.st_blocks * 512 >= st.st_size);
	EXPECT(close(fd), 0);

	EXPECT_ERR(stat("/nope", &st), ENOENT);
	EXPECT_ERR(stat("", &st), ENOENT);
	EXPECT_ERR(stat(FIX("file.txt/x"), &st), ENOTDIR);
	EXPECT_ERR(stat(FIX("dangling"), &st), ENOENT);
	EXPECT(lstat(FIX("dangling"), &st), 0);
	EXPECT_ERR(syscall(SYS_stat, BADPTR, &st), EFAULT);
	EXPECT_ERR(syscall(SYS_stat, "/etc", BADPTR), EFAULT);
	EXPECT_ERR(syscall(SYS_lstat, "/etc", BADPTR), EFAULT);
	EXPECT_ERR(fstat(99, &st), EBADF);
	EXPECT_ERR(fstat(-1, &st), EBADF);
	EXPECT_ERR(syscall(SYS_fstat, 0, BADPTR), EFAULT);
	return t_done();
}
