/* munmap: partial unmaps, unmapping holes, and argument errors. */
#include "t.h"

int main(void)
{
	long pg = 4096;
	char *p = EXPECT_MAP(mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	memset(p, 'x', 4 * pg);
	EXPECT(munmap(p + pg, pg), 0);
	EXPECT_TRUE(p[0] == 'x' && p[2 * pg] == 'x' && p[3 * pg] == 'x');
	/* Unmapping an already unmapped range succeeds. */
	EXPECT(munmap(p + pg, pg), 0);
	/* The hole is free again for a fixed-noreplace mapping. */
	char *q = EXPECT_MAP(mmap(p + pg, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0));
	EXPECT_TRUE(q == p + pg && q[0] == 0);
	/* An unaligned length is rounded up. */
	EXPECT(munmap(p + 3 * pg, 1), 0);
	EXPECT(munmap(p, 3 * pg), 0);

	EXPECT_ERR(munmap(p + 1, pg), EINVAL);
	EXPECT_ERR(munmap(p, 0), EINVAL);
	EXPECT_ERR(munmap((void *)0xffff900000000000UL, pg), EINVAL);
	EXPECT_ERR(munmap(NULL, (size_t)-4096), EINVAL);
	return t_done();
}
