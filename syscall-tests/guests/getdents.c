/* getdents64: sorted listings, d_type, rewind and errors. */
#include "t.h"
#include <dirent.h>

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

static char names[4096][64];
static int types[4096];
static int count;

static int cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* Reads the whole directory with a small buffer so several calls are made. */
static long list(int fd, size_t bufsz)
{
	static char buf[65536];
	long calls = 0;
	count = 0;
	for (;;) {
		long n = syscall(SYS_getdents64, fd, buf, bufsz);
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		calls++;
		for (long off = 0; off < n;) {
			struct linux_dirent64 *d = (void *)(buf + off);
			if (count < 4096) {
				snprintf(names[count], sizeof names[count], "%s", d->d_name);
				types[count] = d->d_type;
				count++;
			}
			off += d->d_reclen;
		}
	}
	return calls;
}

static char type_char(int t)
{
	switch (t) {
	case DT_REG: return 'f';
	case DT_DIR: return 'd';
	case DT_LNK: return 'l';
	case DT_UNKNOWN: return '?';
	}
	return 'o';
}

int main(void)
{
	int fd = EXPECT(open(FIX("dir"), O_RDONLY | O_DIRECTORY), 3);
	EXPECT_TRUE(list(fd, 65536) >= 1);
	/* Sort name+type lines for a stable order. */
	char lines[16][80];
	int n = count < 16 ? count : 16;
	for (int i = 0; i < n; i++)
		snprintf(lines[i], sizeof lines[i], "%s %c", names[i], type_char(types[i]));
	qsort(lines, n, sizeof lines[0], cmp);
	for (int i = 0; i < n; i++)
		SHOW("dir entry: %s", lines[i]);
	/* At the end, further calls return 0; rewinding restarts. */
	static char buf[4096];
	EXPECT(syscall(SYS_getdents64, fd, buf, sizeof buf), 0);
	EXPECT(lseek(fd, 0, SEEK_SET), 0);
	EXPECT_TRUE(list(fd, 4096) >= 1 && count == 7);
	EXPECT(close(fd), 0);

	/* A large host directory read through a small buffer. */
	fd = EXPECT(open("/etc", O_RDONLY | O_DIRECTORY), 3);
	EXPECT_TRUE(list(fd, 256) > 1);
	qsort(names, count, sizeof names[0], cmp);
	SHOW("/etc entries: %d", count);
	int has_passwd = 0, has_dot = 0, has_dotdot = 0;
	for (int i = 0; i < count; i++) {
		has_passwd |= !strcmp(names[i], "passwd");
		has_dot |= !strcmp(names[i], ".");
		has_dotdot |= !strcmp(names[i], "..");
	}
	EXPECT_TRUE(has_passwd && has_dot && has_dotdot);
	for (int i = 0; i < count; i++)
		SHOW("  %s", names[i]);
	EXPECT(close(fd), 0);

	/* Errors. */
	fd = EXPECT(open(FIX("file.txt"), O_RDONLY), 3);
	EXPECT_ERR(syscall(SYS_getdents64, fd, buf, sizeof buf), ENOTDIR);
	EXPECT(close(fd), 0);
	EXPECT_ERR(syscall(SYS_getdents64, 99, buf, sizeof buf), EBADF);
	fd = EXPECT(open(FIX("dir"), O_RDONLY | O_DIRECTORY), 3);
	EXPECT_ERR(syscall(SYS_getdents64, fd, buf, 1), EINVAL);
	EXPECT_ERR(syscall(SYS_getdents64, fd, BADPTR, 4096), EFAULT);
	EXPECT(close(fd), 0);
	return t_done();
}
