/* set_mempolicy_home_node(2): node 0, the one node, is a home for an
 * MPOL_BIND or MPOL_PREFERRED_MANY mapping and a mapping with no policy
 * is passed over (a range of only those is ENOENT); another policy is
 * EOPNOTSUPP; another node, flags, a misaligned start, a wrapping range
 * are EINVAL; an empty range is nothing. */
#include "t.h"

#ifndef SYS_set_mempolicy_home_node
#define SYS_set_mempolicy_home_node 450
#endif
#define PG 4096

static long home(void *p, unsigned long len, unsigned long node, unsigned long flags)
{
	return syscall(SYS_set_mempolicy_home_node, p, len, node, flags);
}

static long bind_(void *p, unsigned long len, long mode)
{
	unsigned long mask = 1;
	return syscall(SYS_mbind, p, len, mode, &mask, 64UL, 0);
}

int main(void)
{
	char *p = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT_TRUE(p != MAP_FAILED);
	/* No policy at all. */
	EXPECT_ERR(home(p, 4 * PG, 0, 0), ENOENT);
	EXPECT(bind_(p, PG, 2 /* MPOL_BIND */), 0);
	EXPECT(bind_(p + PG, PG, 5 /* MPOL_PREFERRED_MANY */), 0);
	EXPECT(home(p, 2 * PG, 0, 0), 0);
	EXPECT(bind_(p + 2 * PG, PG, 3 /* MPOL_INTERLEAVE */), 0);
	EXPECT_ERR(home(p, 3 * PG, 0, 0), EOPNOTSUPP);
	EXPECT_ERR(home(p, PG, 1, 0), EINVAL);
	EXPECT_ERR(home(p, PG, 0, 1), EINVAL);
	EXPECT_ERR(home(p, -2UL * PG, 0, 0), EINVAL);
	EXPECT(home(p, 0, 0, 0), 0);
	EXPECT_ERR(home(p + 1, PG, 0, 0), EINVAL);
	/* No policy, then MPOL_BIND. */
	char *q = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT(bind_(q + PG, PG, 2), 0);
	CHECK(home(q, 2 * PG, 0, 0));
	/* Unmapped. */
	munmap(q, 2 * PG);
	CHECK(home(q, 2 * PG, 0, 0));
	return t_done();
}
