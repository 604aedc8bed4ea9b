/* memfd_create(2) and file sealing (fcntl(2) F_ADD_SEALS / F_GET_SEALS):
 * the flags and name checks, the file's identity (/proc/self/fd link,
 * fstat, F_GETFL), I/O, shared and private mappings, and every seal with
 * the errno Linux gives when it bites. */
#include "t.h"
#include <sys/vfs.h>

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x1U
#define MFD_ALLOW_SEALING 0x2U
#endif
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x8U
#define MFD_EXEC 0x10U
#endif
#ifndef F_ADD_SEALS
#define F_ADD_SEALS 1033
#define F_GET_SEALS 1034
#define F_SEAL_SEAL 0x1
#define F_SEAL_SHRINK 0x2
#define F_SEAL_GROW 0x4
#define F_SEAL_WRITE 0x8
#endif
#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x10
#endif
#ifndef F_SEAL_EXEC
#define F_SEAL_EXEC 0x20
#endif

static long mfd(const char *name, unsigned flags)
{
	return syscall(SYS_memfd_create, name, flags);
}

static int link_is(int fd, const char *want)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, buf, sizeof buf - 1);
	if (n < 0)
		return 0;
	buf[n] = 0;
	return strcmp(buf, want) == 0;
}

static int reopen(int fd, int flags)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	return open(path, flags);
}

int main(void)
{
	char name[300];
	char buf[64];
	struct stat st;

	/* Flags: unknown bits and MFD_EXEC with MFD_NOEXEC_SEAL are EINVAL;
	 * the flag check comes before the name is read. */
	EXPECT_ERR(mfd("x", 0x40), EINVAL);
	EXPECT_ERR(mfd("x", 0x80000000U), EINVAL);
	EXPECT_ERR(mfd("x", MFD_EXEC | MFD_NOEXEC_SEAL), EINVAL);
	EXPECT_ERR(mfd(BADPTR, 0x40), EINVAL);
	EXPECT_ERR(mfd(BADPTR, 0), EFAULT);

	/* Names: 249 bytes fit, 250 do not. */
	memset(name, 'n', sizeof name);
	name[249] = 0;
	int longfd = EXPECT(mfd(name, 0), 3);
	EXPECT(close(longfd), 0);
	name[249] = 'n';
	name[250] = 0;
	EXPECT_ERR(mfd(name, 0), EINVAL);
	EXPECT(mfd("", 0), 3);
	EXPECT_TRUE(link_is(3, "/memfd: (deleted)"));
	EXPECT(close(3), 0);

	/* Identity: the link, close-on-exec, O_RDWR|O_LARGEFILE, a regular
	 * file of mode 0777 with no link, owned by the caller. */
	int fd = EXPECT(mfd("test", MFD_CLOEXEC | MFD_ALLOW_SEALING), 3);
	EXPECT_TRUE(link_is(fd, "/memfd:test (deleted)"));
	EXPECT(fcntl(fd, F_GETFD), FD_CLOEXEC);
	EXPECT(fcntl(fd, F_GETFL) & (O_ACCMODE | O_PATH | O_APPEND), O_RDWR);
	EXPECT(fstat(fd, &st), 0);
	EXPECT_TRUE(S_ISREG(st.st_mode));
	EXPECT(st.st_mode & 07777, 0777);
	EXPECT(st.st_nlink, 0);
	EXPECT(st.st_size, 0);
	EXPECT_TRUE(st.st_uid == geteuid() && st.st_gid == getegid());
	struct statfs sfs;
	EXPECT(fstatfs(fd, &sfs), 0);
	EXPECT(sfs.f_type, 0x01021994 /* TMPFS_MAGIC */);
	int plain = EXPECT(mfd("plain", 0), 4);
	EXPECT(fcntl(plain, F_GETFD), 0);

	/* I/O and the position. */
	EXPECT(write(fd, "hello world", 11), 11);
	EXPECT(lseek(fd, 0, SEEK_CUR), 11);
	EXPECT(lseek(fd, 0, SEEK_END), 11);
	EXPECT(lseek(fd, 6, SEEK_SET), 6);
	memset(buf, 0, sizeof buf);
	EXPECT(read(fd, buf, sizeof buf), 5);
	EXPECT_TRUE(strcmp(buf, "world") == 0);
	EXPECT(pwrite(fd, "W", 1, 6), 1);
	EXPECT(pread(fd, buf, 11, 0), 11);
	EXPECT_TRUE(memcmp(buf, "hello World", 11) == 0);
	EXPECT(ftruncate(fd, 8192), 0);
	EXPECT(fstat(fd, &st), 0);
	EXPECT(st.st_size, 8192);
	EXPECT(pread(fd, buf, 4, 8000), 4);
	EXPECT_TRUE(memcmp(buf, "\0\0\0\0", 4) == 0);

	/* A shared mapping and the descriptor see each other's writes. */
	char *shared = EXPECT_MAP(mmap(NULL, 8192, PROT_READ | PROT_WRITE,
				       MAP_SHARED, fd, 0));
	EXPECT_TRUE(memcmp(shared, "hello World", 11) == 0);
	memcpy(shared + 4096, "via map", 7);
	EXPECT(pread(fd, buf, 7, 4096), 7);
	EXPECT_TRUE(memcmp(buf, "via map", 7) == 0);
	EXPECT(pwrite(fd, "via fd", 6, 100), 6);
	EXPECT_TRUE(memcmp(shared + 100, "via fd", 6) == 0);

	/* A private mapping starts with the contents; its writes stay its own. */
	char *priv = EXPECT_MAP(mmap(NULL, 8192, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE, fd, 0));
	EXPECT_TRUE(memcmp(priv, "hello World", 11) == 0);
	priv[0] = 'J';
	EXPECT(pread(fd, buf, 1, 0), 1);
	EXPECT(buf[0], 'h');
	EXPECT(shared[0], 'h');

	/* A child shares the file: its write shows in the parent's mapping. */
	pid_t pid = fork();
	if (pid == 0) {
		_exit(pwrite(fd, "child", 5, 200) == 5 ? 0 : 1);
	}
	int status = -1;
	EXPECT_TRUE(waitpid(pid, &status, 0) == pid);
	EXPECT(status, 0);
	EXPECT_TRUE(memcmp(shared + 200, "child", 5) == 0);

	/* Seals. None yet on a sealable memfd; F_SEAL_SEAL alone on the
	 * others, which refuse more (EPERM). Unknown bits are EINVAL. */
	EXPECT(fcntl(fd, F_GET_SEALS), 0);
	EXPECT(fcntl(plain, F_GET_SEALS), F_SEAL_SEAL);
	EXPECT_ERR(fcntl(plain, F_ADD_SEALS, F_SEAL_WRITE), EPERM);
	EXPECT_ERR(fcntl(fd, F_ADD_SEALS, 0x40), EINVAL);

	/* F_SEAL_WRITE while a writable shared mapping exists: EBUSY. The
	 * private mapping does not count. */
	EXPECT_ERR(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), EBUSY);
	EXPECT(munmap(shared, 8192), 0);
	EXPECT(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), 0);
	EXPECT(fcntl(fd, F_GET_SEALS), F_SEAL_WRITE);
	EXPECT_ERR(write(fd, "x", 1), EPERM);
	EXPECT_ERR(pwrite(fd, "x", 1, 0), EPERM);
	EXPECT_MAP_ERR(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0),
		       EPERM);
	char *ro = EXPECT_MAP(mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0));
	EXPECT_ERR(mprotect(ro, 4096, PROT_READ | PROT_WRITE), EACCES);
	EXPECT(ro[200], 'c');
	char *priv2 = EXPECT_MAP(mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				      MAP_PRIVATE, fd, 0));
	priv2[0] = 'P';
	EXPECT(pread(fd, buf, 1, 0), 1);
	EXPECT(buf[0], 'h');
	/* The size may still change. */
	EXPECT(ftruncate(fd, 12288), 0);
	EXPECT(ftruncate(fd, 8192), 0);
	/* Reopened through /proc, it is the same sealed file; a read-only
	 * description may not add seals (EPERM). */
	int rdonly = EXPECT(reopen(fd, O_RDONLY), 5);
	EXPECT(fcntl(rdonly, F_GET_SEALS), F_SEAL_WRITE);
	EXPECT(fcntl(rdonly, F_GETFL) & O_ACCMODE, O_RDONLY);
	EXPECT_ERR(fcntl(rdonly, F_ADD_SEALS, F_SEAL_SEAL), EPERM);
	EXPECT(pread(rdonly, buf, 5, 200), 5);
	EXPECT_TRUE(memcmp(buf, "child", 5) == 0);
	EXPECT(close(rdonly), 0);
	/* F_SEAL_SEAL ends the adding. */
	EXPECT(fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL), 0);
	EXPECT_ERR(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), EPERM);
	EXPECT(fcntl(fd, F_GET_SEALS), F_SEAL_SEAL | F_SEAL_WRITE);
	EXPECT(munmap(ro, 4096), 0);
	EXPECT(munmap(priv, 8192), 0);
	EXPECT(munmap(priv2, 4096), 0);

	/* F_SEAL_SHRINK and F_SEAL_GROW. */
	int sz = EXPECT(mfd("size", MFD_ALLOW_SEALING), 5);
	EXPECT(ftruncate(sz, 8192), 0);
	EXPECT(fcntl(sz, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	EXPECT_ERR(ftruncate(sz, 4096), EPERM);
	EXPECT(ftruncate(sz, 8192), 0);
	EXPECT(ftruncate(sz, 10000), 0);
	EXPECT(fcntl(sz, F_ADD_SEALS, F_SEAL_GROW), 0);
	EXPECT(fcntl(sz, F_GET_SEALS), F_SEAL_SHRINK | F_SEAL_GROW);
	EXPECT_ERR(ftruncate(sz, 10001), EPERM);
	EXPECT_ERR(ftruncate(sz, 9999), EPERM);
	EXPECT(ftruncate(sz, 10000), 0);
	/* Writes inside the size work; one that would grow the file is
	 * refused page by page: the pages wholly inside are written (a short
	 * count), and with none of them it is EPERM. */
	EXPECT(pwrite(sz, "inside", 6, 100), 6);
	EXPECT(pwrite(sz, "0123456789", 10, 4090), 10);
	EXPECT_ERR(pwrite(sz, "0123456789", 10, 9995), EPERM);
	EXPECT_ERR(pwrite(sz, "0123456789", 10, 10000), EPERM);
	EXPECT(pwrite(sz, "0123456789", 10, 8190), 10);
	char big[8192];
	memset(big, 'b', sizeof big);
	EXPECT(pwrite(sz, big, sizeof big, 4000), 4192);
	EXPECT(lseek(sz, 0, SEEK_END), 10000);
	EXPECT_ERR(write(sz, "x", 1), EPERM);
	EXPECT(fstat(sz, &st), 0);
	EXPECT(st.st_size, 10000);
	/* fallocate: growing is refused like a write, a hole keeps the size. */
	EXPECT_ERR(fallocate(sz, 0, 9000, 2000), EPERM);
	EXPECT_ERR(fallocate(sz, FALLOC_FL_KEEP_SIZE, 9000, 2000), EPERM);
	EXPECT(fallocate(sz, 0, 0, 10000), 0);
	EXPECT(fallocate(sz, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4000, 300),
	       0);
	EXPECT(pread(sz, buf, 2, 4000), 2);
	EXPECT_TRUE(memcmp(buf, "\0\0", 2) == 0);
	EXPECT(pread(sz, buf, 4, 4298), 4);
	EXPECT_TRUE(memcmp(buf, "\0\0bb", 4) == 0);
	EXPECT(fstat(sz, &st), 0);
	EXPECT(st.st_size, 10000);
	EXPECT(close(sz), 0);

	/* fallocate on a memfd: modes tmpfs lacks, a read-only description,
	 * growth, a hole (whole pages and the edges), and a write seal. */
	int fa = EXPECT(mfd("fallocate", MFD_ALLOW_SEALING), 5);
	EXPECT_ERR(fallocate(fa, FALLOC_FL_PUNCH_HOLE, 0, 10), EOPNOTSUPP);
	EXPECT_ERR(fallocate(fa, FALLOC_FL_ZERO_RANGE, 0, 10), EOPNOTSUPP);
	EXPECT_ERR(fallocate(fa, 0, -1, 10), EINVAL);
	EXPECT_ERR(fallocate(fa, 0, 0, 0), EINVAL);
	EXPECT(fallocate(fa, FALLOC_FL_KEEP_SIZE, 0, 5000), 0);
	EXPECT(lseek(fa, 0, SEEK_END), 0);
	EXPECT(fallocate(fa, 0, 100, 20000), 0);
	EXPECT(lseek(fa, 0, SEEK_END), 20100);
	EXPECT(fallocate(fa, 0, 0, 100), 0);
	EXPECT(lseek(fa, 0, SEEK_END), 20100);
	memset(big, 'f', sizeof big);
	EXPECT(pwrite(fa, big, sizeof big, 3000), 8192);
	EXPECT(fallocate(fa, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 3500,
			 5000), 0);
	EXPECT(pread(fa, big, 8192, 3000), 8192);
	int zeros = 0, fs = 0;
	for (int i = 0; i < 8192; i++)
		zeros += big[i] == 0, fs += big[i] == 'f';
	EXPECT(zeros, 5000);
	EXPECT(fs, 3192);
	EXPECT_TRUE(big[499] == 'f' && big[500] == 0 && big[5499] == 0 &&
		    big[5500] == 'f');
	int fa_ro = EXPECT(reopen(fa, O_RDONLY), 6);
	EXPECT_ERR(fallocate(fa_ro, 0, 0, 10), EBADF);
	EXPECT(close(fa_ro), 0);
	EXPECT(fcntl(fa, F_ADD_SEALS, F_SEAL_WRITE), 0);
	EXPECT_ERR(fallocate(fa, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
			     10), EPERM);
	EXPECT(fallocate(fa, 0, 0, 30000), 0);
	EXPECT(lseek(fa, 0, SEEK_END), 30000);
	EXPECT(close(fa), 0);

	/* F_SEAL_FUTURE_WRITE: mappings made before stay writable (and need
	 * no EBUSY check); new writes and writable shared mappings are EPERM. */
	int fw = EXPECT(mfd("future", MFD_ALLOW_SEALING), 5);
	EXPECT(ftruncate(fw, 4096), 0);
	char *old = EXPECT_MAP(mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				    MAP_SHARED, fw, 0));
	EXPECT(fcntl(fw, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), 0);
	memcpy(old, "still", 5);
	EXPECT(pread(fw, buf, 5, 0), 5);
	EXPECT_TRUE(memcmp(buf, "still", 5) == 0);
	EXPECT_ERR(pwrite(fw, "no", 2, 0), EPERM);
	EXPECT_MAP_ERR(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fw, 0),
		       EPERM);
	/* The old mapping still pins the file against F_SEAL_WRITE. */
	EXPECT_ERR(fcntl(fw, F_ADD_SEALS, F_SEAL_WRITE), EBUSY);
	EXPECT(munmap(old, 4096), 0);
	EXPECT(fcntl(fw, F_ADD_SEALS, F_SEAL_WRITE), 0);
	EXPECT(fcntl(fw, F_GET_SEALS), F_SEAL_FUTURE_WRITE | F_SEAL_WRITE);
	EXPECT(close(fw), 0);

	/* F_SEAL_EXEC on an executable memfd seals its contents too, and
	 * freezes the execute bits; MFD_NOEXEC_SEAL starts that way, 0666. */
	int ex = EXPECT(mfd("exec", MFD_ALLOW_SEALING | MFD_EXEC), 5);
	EXPECT(fcntl(ex, F_ADD_SEALS, F_SEAL_EXEC), 0);
	EXPECT(fcntl(ex, F_GET_SEALS), F_SEAL_EXEC | F_SEAL_SHRINK | F_SEAL_GROW |
					   F_SEAL_WRITE | F_SEAL_FUTURE_WRITE);
	EXPECT_ERR(fchmod(ex, 0666), EPERM);
	EXPECT(fchmod(ex, 0775), 0);
	EXPECT(close(ex), 0);
	int nx = EXPECT(mfd("noexec", MFD_NOEXEC_SEAL), 5);
	EXPECT(fstat(nx, &st), 0);
	EXPECT(st.st_mode & 07777, 0666);
	EXPECT(fcntl(nx, F_GET_SEALS), F_SEAL_EXEC);
	EXPECT_ERR(fchmod(nx, 0777), EPERM);
	EXPECT(write(nx, "ok", 2), 2);
	EXPECT(fcntl(nx, F_ADD_SEALS, F_SEAL_GROW), 0);
	EXPECT(fcntl(nx, F_GET_SEALS), F_SEAL_EXEC | F_SEAL_GROW);
	EXPECT(close(nx), 0);

	/* Seals on what is not a tmpfs file: EINVAL, except that a
	 * description not open for writing is EPERM first. */
	int p[2];
	EXPECT(pipe(p), 0);
	EXPECT_ERR(fcntl(p[0], F_GET_SEALS), EINVAL);
	EXPECT_ERR(fcntl(p[1], F_ADD_SEALS, F_SEAL_SEAL), EINVAL);
	EXPECT_ERR(fcntl(p[0], F_ADD_SEALS, F_SEAL_SEAL), EPERM);
	int null = open("/dev/null", O_RDWR);
	EXPECT_TRUE(null >= 0);
	EXPECT_ERR(fcntl(null, F_GET_SEALS), EINVAL);
	EXPECT_ERR(fcntl(null, F_ADD_SEALS, F_SEAL_SEAL), EINVAL);
	int ro_fix = open(FIX("file.txt"), O_RDONLY);
	EXPECT_TRUE(ro_fix >= 0);
	EXPECT_ERR(fcntl(ro_fix, F_GET_SEALS), EINVAL);
	EXPECT_ERR(fcntl(ro_fix, F_ADD_SEALS, F_SEAL_SEAL), EPERM);
	int path = open("/", O_PATH);
	EXPECT_ERR(fcntl(path, F_GET_SEALS), EBADF);

	/* A file in /dev/shm (tmpfs) has seals, and F_SEAL_SEAL among them. */
	char shm[64];
	snprintf(shm, sizeof shm, "/dev/shm/ferrovisor-memfd-%d", (int)getpid());
	int sf = open(shm, O_RDWR | O_CREAT | O_EXCL, 0600);
	EXPECT_TRUE(sf >= 0);
	EXPECT(fcntl(sf, F_GET_SEALS), F_SEAL_SEAL);
	EXPECT_ERR(fcntl(sf, F_ADD_SEALS, F_SEAL_WRITE), EPERM);
	EXPECT(unlink(shm), 0);

	/* Close-on-exec is the descriptor's; the plain memfd keeps data. */
	EXPECT(pwrite(plain, "abc", 3, 0), 3);
	EXPECT(pread(plain, buf, 3, 0), 3);
	EXPECT_TRUE(memcmp(buf, "abc", 3) == 0);
	return t_done();
}
