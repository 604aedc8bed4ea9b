/* mremap: grow with MREMAP_MAYMOVE keeping contents, shrink, errors. */
#include "t.h"

int main(void)
{
	long pg = 4096;
	char *p = EXPECT_MAP(mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	for (long i = 0; i < 2 * pg; i++)
		p[i] = (char)(i % 251);
	/* A guard page with other protections right after blocks growth in place. */
	char *guard = p + 2 * pg;
	EXPECT(mprotect(guard, pg, PROT_NONE), 0);
	EXPECT_MAP_ERR(mremap(p, 2 * pg, 8 * pg, 0), ENOMEM);
	char *q = EXPECT_MAP(mremap(p, 2 * pg, 8 * pg, MREMAP_MAYMOVE));
	EXPECT_TRUE(q != p);
	int same = 1;
	for (long i = 0; i < 2 * pg; i++)
		same &= q[i] == (char)(i % 251);
	EXPECT_TRUE(same);
	EXPECT_TRUE(q[8 * pg - 1] == 0);
	q[8 * pg - 1] = 9;
	/* Shrinking stays in place. */
	char *r = EXPECT_MAP(mremap(q, 8 * pg, pg, 0));
	EXPECT_TRUE(r == q);
	EXPECT_TRUE(r[pg - 1] == (char)((pg - 1) % 251));
	/* MREMAP_FIXED to a chosen place. */
	char *dst = EXPECT_MAP(mmap(NULL, 4 * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	char *f = EXPECT_MAP(mremap(r, pg, pg, MREMAP_MAYMOVE | MREMAP_FIXED, dst + pg));
	EXPECT_TRUE(f == dst + pg);
	EXPECT_TRUE(f[1] == 1 && f[250] == (char)250);

	/* Errors. */
	EXPECT_MAP_ERR(mremap(f + 1, pg, 2 * pg, MREMAP_MAYMOVE), EINVAL);
	EXPECT_MAP_ERR(mremap(f, pg, 2 * pg, 0x100), EINVAL);
	EXPECT_MAP_ERR(mremap(f, pg, 0, MREMAP_MAYMOVE), EINVAL);
	EXPECT_MAP_ERR(mremap(f, pg, pg, MREMAP_FIXED, dst), EINVAL);
	EXPECT_MAP_ERR(mremap(guard + 10 * pg, pg, 2 * pg, MREMAP_MAYMOVE), EFAULT);
	EXPECT(munmap(dst, 4 * pg), 0);
	EXPECT(munmap(guard, pg), 0);
	return t_done();
}
