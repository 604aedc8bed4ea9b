/* mincore(2): residency of anonymous, shared and memfd pages, and the
 * errnos of a bad start, a hole, a range past user space and a bad vec. */
#include "t.h"
#include <sys/mman.h>

#define PG 4096

static void show(const char *what, unsigned char *v, int n)
{
	char s[64];
	for (int i = 0; i < n; i++)
		s[i] = '0' + (v[i] & 1);
	s[n] = 0;
	SHOW("%s: %s", what, s);
}

int main(void)
{
	unsigned char v[16];
	char *p = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT_TRUE(p != MAP_FAILED);
	EXPECT(mincore(p, 4 * PG, v), 0);
	show("untouched", v, 4);
	p[0] = 1;
	(void)*(volatile char *)(p + 2 * PG);
	EXPECT(mincore(p, 4 * PG, v), 0);
	show("page 0 written, page 2 read", v, 4);
	/* The length rounds up to whole pages. */
	memset(v, 7, sizeof v);
	EXPECT(mincore(p + 2 * PG, 1, v), 0);
	SHOW("one byte of page 2: %d, next byte untouched: %d", v[0] & 1, v[1]);
	EXPECT(mincore(p, 0, v), 0);
	EXPECT(madvise(p, PG, MADV_DONTNEED), 0);
	EXPECT(mincore(p, 4 * PG, v), 0);
	show("after MADV_DONTNEED of page 0", v, 4);

	EXPECT_ERR(mincore(p + 1, PG, v), EINVAL);
	EXPECT_ERR(mincore(p + 100, 0, v), EINVAL);
	EXPECT_ERR(mincore(p, 4 * PG, BADPTR), EFAULT);
	EXPECT_ERR(mincore(p, 1UL << 62, v), ENOMEM);
	EXPECT_ERR(mincore(p, -(unsigned long)PG, v), ENOMEM);
	/* A hole: the pages before it are written, then ENOMEM. */
	EXPECT(munmap(p + PG, PG), 0);
	memset(v, 7, sizeof v);
	EXPECT_ERR(mincore(p, 4 * PG, v), ENOMEM);
	SHOW("before the hole: %d", v[0]);
	EXPECT_ERR(mincore(p + PG, PG, v), ENOMEM);
	EXPECT_ERR(mincore((void *)0x10000, PG, v), ENOMEM);
	/* A hole comes before a bad vec only where it starts the range. */
	EXPECT_ERR(mincore(p + PG, 2 * PG, BADPTR), ENOMEM);

	/* A shared anonymous mapping: touched pages are resident, in this
	 * mapping and in a second view of the same pages. */
	char *s = mmap(NULL, 3 * PG, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	EXPECT_TRUE(s != MAP_FAILED);
	s[PG] = 1;
	EXPECT(mincore(s, 3 * PG, v), 0);
	show("shared, page 1 written", v, 3);

	/* A memfd's pages are resident once written, mapped or not; a page
	 * past the end of the file is not. */
	int fd = memfd_create("m", 0);
	char buf[PG] = {1};
	EXPECT(write(fd, buf, PG), PG);
	char *m = mmap(NULL, 2 * PG, PROT_READ, MAP_SHARED, fd, 0);
	EXPECT_TRUE(m != MAP_FAILED);
	EXPECT(mincore(m, 2 * PG, v), 0);
	show("memfd of one page, mapped two", v, 2);
	char *mp = mmap(NULL, PG, PROT_READ, MAP_PRIVATE, fd, 0);
	EXPECT_TRUE(mp != MAP_FAILED);
	(void)*(volatile char *)mp;
	EXPECT(mincore(mp, PG, v), 0);
	show("private memfd mapping, read", v, 1);

	/* Across two mappings side by side. */
	char *q = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT_TRUE(q != MAP_FAILED);
	EXPECT(mprotect(q + PG, PG, PROT_READ), 0);
	q[0] = 1;
	EXPECT(mincore(q, 2 * PG, v), 0);
	show("two VMAs, first written", v, 2);
	return t_done();
}
