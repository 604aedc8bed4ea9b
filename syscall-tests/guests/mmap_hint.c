/* A free hint address is honoured; an occupied one is moved elsewhere. */
#include "t.h"

int main(void)
{
	long pg = 4096;
	void *hint = (void *)0x200000000000UL;
	char *p = EXPECT_MAP(mmap(hint, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	EXPECT_TRUE(p == hint);
	p[0] = 1;
	char *q = EXPECT_MAP(mmap(hint, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	EXPECT_TRUE(q != hint);
	EXPECT_TRUE(p[0] == 1);
	EXPECT(munmap(q, pg), 0);
	/* An unaligned hint is rounded, never fails. */
	char *r = EXPECT_MAP(mmap((char *)0x300000000000UL + 123, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	EXPECT_TRUE(((uintptr_t)r & (pg - 1)) == 0);
	EXPECT(munmap(r, pg), 0);
	/* A hint beyond the user address space is ignored. */
	char *h = EXPECT_MAP(mmap((void *)0xffff900000000000UL, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	EXPECT_TRUE((uintptr_t)h < 0x800000000000UL);
	EXPECT(munmap(h, pg), 0);
	EXPECT(munmap(p, 4 * pg), 0);
	/* Fixed mappings above the user address space are refused. */
	EXPECT_MAP_ERR(mmap((void *)0xffff900000000000UL, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), ENOMEM);
	return t_done();
}
