/* Calls older programs and runtimes still make: the old getdents (its
 * linux_dirent with d_type as the record's last byte), setrlimit,
 * readahead, sync_file_range, sysfs, ustat and restart_syscall, with Linux's
 * errnos in Linux's order. */
#include "t.h"
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/socket.h>

struct old_dirent {
	unsigned long d_ino;
	unsigned long d_off;
	unsigned short d_reclen;
	char d_name[];
};

static void list_old(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	EXPECT_TRUE(fd >= 0);
	char buf[4096];
	long n = syscall(SYS_getdents, fd, buf, sizeof buf);
	EXPECT_TRUE(n > 0);
	/* Names with their types, sorted by the shell-free way: count the
	 * ones the fixture is known to hold, and check each record's shape. */
	int seen_dot = 0, seen_file = 0, shapes_ok = 1;
	for (long off = 0; off < n;) {
		struct old_dirent *d = (struct old_dirent *)(buf + off);
		unsigned char type = *((unsigned char *)d + d->d_reclen - 1);
		size_t len = strlen(d->d_name);
		if (d->d_reclen % 8 || d->d_reclen < 18 + len + 2 || d->d_ino == 0)
			shapes_ok = 0;
		if (!strcmp(d->d_name, ".") && type == DT_DIR)
			seen_dot = 1;
		if (!strcmp(d->d_name, "f") && type == DT_REG)
			seen_file = 1;
		off += d->d_reclen;
	}
	SHOW("old getdents: . as dir %d, f as file %d, records well formed %d", seen_dot, seen_file, shapes_ok);
	/* At the end: 0. A buffer too small for one record: EINVAL. */
	EXPECT(syscall(SYS_getdents, fd, buf, sizeof buf), 0);
	EXPECT_OK(lseek(fd, 0, SEEK_SET));
	EXPECT_ERR(syscall(SYS_getdents, fd, buf, 10), EINVAL);
	EXPECT_ERR(syscall(SYS_getdents, fd, BADPTR, sizeof buf), EFAULT);
	close(fd);
	EXPECT_ERR(syscall(SYS_getdents, 999, buf, sizeof buf), EBADF);
	int file = open(FIX("dir/a"), O_RDONLY);
	EXPECT_ERR(syscall(SYS_getdents, file, buf, sizeof buf), ENOTDIR);
	close(file);
}

int main(void)
{
	mkdir("/tmp/old_calls", 0755);
	close(open("/tmp/old_calls/f", O_CREAT | O_WRONLY, 0644));
	mkdir("/tmp/old_calls/sub", 0755);
	list_old("/tmp/old_calls");

	/* setrlimit: as prlimit64 on oneself. */
	struct rlimit r, back;
	EXPECT(getrlimit(RLIMIT_NOFILE, &r), 0);
	struct rlimit lower = {r.rlim_cur > 64 ? 64 : r.rlim_cur, r.rlim_max};
	EXPECT(syscall(SYS_setrlimit, RLIMIT_NOFILE, &lower), 0);
	EXPECT(getrlimit(RLIMIT_NOFILE, &back), 0);
	SHOW("NOFILE soft after setrlimit: %lu", (unsigned long)back.rlim_cur);
	struct rlimit inverted = {100, 10};
	EXPECT_ERR(syscall(SYS_setrlimit, RLIMIT_NOFILE, &inverted), EINVAL);
	EXPECT_ERR(syscall(SYS_setrlimit, 999, &lower), EINVAL);
	EXPECT_ERR(syscall(SYS_setrlimit, RLIMIT_NOFILE, BADPTR), EFAULT);
	EXPECT(syscall(SYS_setrlimit, RLIMIT_NOFILE, &r), 0);

	/* readahead: a readable regular file only. */
	int fd = open(FIX("dir/a"), O_RDONLY);
	EXPECT(syscall(SYS_readahead, fd, 0L, 4096L), 0);
	close(fd);
	int w = open("/tmp/old_calls/f", O_WRONLY);
	EXPECT_ERR(syscall(SYS_readahead, w, 0L, 4096L), EBADF);
	int d = open("/tmp/old_calls", O_RDONLY | O_DIRECTORY);
	EXPECT_ERR(syscall(SYS_readahead, d, 0L, 4096L), EINVAL);
	int p[2];
	EXPECT(pipe(p), 0);
	EXPECT_ERR(syscall(SYS_readahead, p[0], 0L, 4096L), EINVAL);
	EXPECT_ERR(syscall(SYS_readahead, 999, 0L, 4096L), EBADF);

	/* sync_file_range: EBADF, then the flags, the range, the type. */
	EXPECT(syscall(SYS_sync_file_range, w, 0L, 0L, 7), 0);
	EXPECT(syscall(SYS_sync_file_range, d, 0L, 100L, 2), 0);
	EXPECT_ERR(syscall(SYS_sync_file_range, 999, 0L, 0L, 8), EBADF);
	EXPECT_ERR(syscall(SYS_sync_file_range, w, 0L, 0L, 8), EINVAL);
	EXPECT_ERR(syscall(SYS_sync_file_range, w, -1L, 0L, 0), EINVAL);
	EXPECT_ERR(syscall(SYS_sync_file_range, w, 0L, -5L, 0), EINVAL);
	EXPECT_ERR(syscall(SYS_sync_file_range, w, 0x7fffffffffffff00L, 0x1000L, 0), EINVAL);
	EXPECT_ERR(syscall(SYS_sync_file_range, p[1], 0L, 0L, 2), ESPIPE);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	EXPECT_ERR(syscall(SYS_sync_file_range, s, 0L, 0L, 2), ESPIPE);

	/* sysfs: the file system types by index and by name, each way
	 * agreeing (the list itself is the kernel's own). */
	long types = syscall(SYS_sysfs, 3);
	EXPECT_TRUE(types > 0);
	int agree = 1, proc = 0, tmpfs = 0;
	for (long i = 0; i < types; i++) {
		char name[64] = {0};
		agree &= syscall(SYS_sysfs, 2, i, name) == 0 && syscall(SYS_sysfs, 1, name) == i;
		proc |= !strcmp(name, "proc");
		tmpfs |= !strcmp(name, "tmpfs");
	}
	SHOW("sysfs: indexes and names agree %d, proc %d, tmpfs %d", agree, proc, tmpfs);
	char name[64];
	EXPECT_ERR(syscall(SYS_sysfs, 2, types, name), EINVAL);
	EXPECT_ERR(syscall(SYS_sysfs, 2, 0L, BADPTR), EFAULT);
	EXPECT_ERR(syscall(SYS_sysfs, 1, "no-such-fs"), EINVAL);
	EXPECT_ERR(syscall(SYS_sysfs, 1, BADPTR), EFAULT);
	EXPECT_ERR(syscall(SYS_sysfs, 0), EINVAL);
	EXPECT_ERR(syscall(SYS_sysfs, 4), EINVAL);

	/* ustat: the root's device, one nothing is mounted from, a bad
	 * buffer. */
	struct stat root;
	EXPECT(stat("/", &root), 0);
	struct { int tfree; unsigned long tinode; char fname[6], fpack[6]; } u;
	memset(&u, 0x55, sizeof u);
	EXPECT(syscall(SYS_ustat, (unsigned)root.st_dev, &u), 0);
	SHOW("ustat of /: names empty %d", u.fname[0] == 0 && u.fpack[0] == 0);
	EXPECT_ERR(syscall(SYS_ustat, (unsigned)makedev(4095, 1048575), &u), EINVAL);
	EXPECT_ERR(syscall(SYS_ustat, (unsigned)root.st_dev, BADPTR), EFAULT);

	/* restart_syscall with nothing to restart. */
	EXPECT_ERR(syscall(SYS_restart_syscall), EINTR);
	return t_done();
}
