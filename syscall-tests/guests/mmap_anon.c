/* Anonymous mmap: private and shared, zero fill, alignment, bad arguments. */
#include "t.h"

int main(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	EXPECT(pg, 4096);
	char *p = EXPECT_MAP(mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	EXPECT_TRUE(((uintptr_t)p & (pg - 1)) == 0);
	int zero = 1;
	for (long i = 0; i < 3 * pg; i++)
		zero &= p[i] == 0;
	EXPECT_TRUE(zero);
	for (long i = 0; i < 3 * pg; i++)
		p[i] = (char)(i * 3);
	long sum = 0;
	for (long i = 0; i < 3 * pg; i++)
		sum += (unsigned char)p[i];
	SHOW("private sum: %ld", sum);
	EXPECT(munmap(p, 3 * pg), 0);

	char *s = EXPECT_MAP(mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
	strcpy(s, "shared anon");
	SHOW("shared: %s", s);
	EXPECT(munmap(s, pg), 0);

	/* A length that is not a page multiple is rounded up. */
	char *r = EXPECT_MAP(mmap(NULL, 100, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	r[pg - 1] = 1;
	EXPECT(munmap(r, 100), 0);

	/* PROT_NONE reservations are fine. */
	char *n = EXPECT_MAP(mmap(NULL, 16 * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
	EXPECT(mprotect(n + pg, pg, PROT_READ | PROT_WRITE), 0);
	n[pg] = 7;
	EXPECT(n[pg], 7);
	EXPECT(munmap(n, 16 * pg), 0);

	/* Errors. */
	EXPECT_MAP_ERR(mmap(NULL, 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), EINVAL);
	EXPECT_MAP_ERR(mmap(NULL, pg, PROT_READ, MAP_ANONYMOUS, -1, 0), EINVAL);
	/* Without MAP_ANONYMOUS the descriptor is checked first. */
	EXPECT_MAP_ERR(mmap(NULL, pg, PROT_READ, 0, -1, 0), EBADF);
	int fd = EXPECT(open(FIX("file.txt"), O_RDONLY), 3);
	EXPECT_MAP_ERR(mmap(NULL, pg, PROT_READ, 0, fd, 0), EINVAL);
	EXPECT(close(fd), 0);
	EXPECT_MAP_ERR(mmap(NULL, pg, PROT_READ, MAP_PRIVATE, -1, 0), EBADF);
	EXPECT_MAP_ERR(mmap(NULL, pg, PROT_READ, MAP_PRIVATE, 99, 0), EBADF);
	EXPECT_MAP_ERR(mmap(NULL, (size_t)-4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), ENOMEM);
	/* MAP_SHARED_VALIDATE rejects unknown flags on files with EOPNOTSUPP. */
	fd = EXPECT(open(FIX("file.txt"), O_RDONLY), 3);
	EXPECT_MAP_ERR(mmap(NULL, pg, PROT_READ, MAP_SHARED_VALIDATE | 0x200000, fd, 0), EOPNOTSUPP);
	char *v = EXPECT_MAP(mmap(NULL, pg, PROT_READ, MAP_SHARED_VALIDATE, fd, 0));
	EXPECT(v[0], 'h');
	EXPECT(munmap(v, pg), 0);
	EXPECT(close(fd), 0);
	EXPECT_MAP_ERR(mmap(NULL, pg, PROT_READ, MAP_SHARED_VALIDATE | MAP_ANONYMOUS | 0x200000, -1, 0), EINVAL);
	return t_done();
}
