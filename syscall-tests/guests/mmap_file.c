/* File-backed private mappings agree with read(); writes stay private. */
#include "t.h"

static unsigned char expect_big(long i)
{
	return (unsigned char)(i * 7 + i / 4096);
}

int main(void)
{
	long pg = 4096;
	static char buf[65536];
	int fd = EXPECT(open("/etc/passwd", O_RDONLY), 3);
	long n = t_slurp("/etc/passwd", buf, sizeof buf);
	EXPECT_TRUE(n > 0);
	char *m = EXPECT_MAP(mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0));
	EXPECT_TRUE(memcmp(m, buf, n) == 0);
	/* The tail of the last page reads as zeros. */
	int zero = 1;
	for (long i = n; i < ((n + pg - 1) & ~(pg - 1)); i++)
		zero &= m[i] == 0;
	EXPECT_TRUE(zero);
	EXPECT(munmap(m, n), 0);
	EXPECT(close(fd), 0);

	fd = EXPECT(open(FIX("big.bin"), O_RDONLY), 3);
	/* Offset mapping, second and third pages + tail. */
	unsigned char *b = EXPECT_MAP(mmap(NULL, 2 * pg + 100, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, pg));
	int ok = 1;
	for (long i = 0; i < 2 * pg + 100; i++)
		ok &= b[i] == expect_big(pg + i);
	EXPECT_TRUE(ok);
	/* A private write is seen in the mapping only. */
	b[0] = 0xee;
	unsigned char c;
	EXPECT(pread(fd, &c, 1, pg), 1);
	EXPECT_TRUE(c == expect_big(pg) && b[0] == 0xee);
	/* Mapping beyond the end of the file is allowed; the pages past EOF
	 * would raise SIGBUS when touched (not tested here). */
	unsigned char *far = EXPECT_MAP(mmap(NULL, 8 * pg, PROT_READ, MAP_PRIVATE, fd, 0));
	EXPECT(far[3 * pg + 99], expect_big(3 * pg + 99));
	EXPECT(far[3 * pg + 100], 0);
	EXPECT(munmap(far, 8 * pg), 0);
	EXPECT(munmap(b, 2 * pg + 100), 0);

	/* Errors: unaligned offset, shared writable mapping of a read-only fd,
	 * directories. */
	EXPECT_MAP_ERR(mmap(NULL, pg, PROT_READ, MAP_PRIVATE, fd, 100), EINVAL);
	EXPECT_MAP_ERR(mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), EACCES);
	char *sh = EXPECT_MAP(mmap(NULL, pg, PROT_READ, MAP_SHARED, fd, 0));
	EXPECT((unsigned char)sh[5], expect_big(5));
	EXPECT_ERR(mprotect(sh, pg, PROT_READ | PROT_WRITE), EACCES);
	EXPECT(munmap(sh, pg), 0);
	EXPECT(close(fd), 0);
	int d = EXPECT(open("/etc", O_RDONLY), 3);
	EXPECT_MAP_ERR(mmap(NULL, pg, PROT_READ, MAP_PRIVATE, d, 0), ENODEV);
	EXPECT(close(d), 0);
	int w = EXPECT(open("/dev/null", O_WRONLY), 3);
	EXPECT_MAP_ERR(mmap(NULL, pg, PROT_READ, MAP_PRIVATE, w, 0), EACCES);
	EXPECT(close(w), 0);
	/* /dev/zero private mappings are anonymous memory. */
	int z = EXPECT(open("/dev/zero", O_RDWR), 3);
	char *zm = EXPECT_MAP(mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE, z, 0));
	EXPECT(zm[100], 0);
	zm[100] = 5;
	EXPECT(munmap(zm, pg), 0);
	EXPECT(close(z), 0);
	return t_done();
}
