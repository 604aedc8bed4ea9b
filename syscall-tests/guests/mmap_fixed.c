/* MAP_FIXED replaces existing pages; MAP_FIXED_NOREPLACE refuses to. */
#include "t.h"

int main(void)
{
	long pg = 4096;
	char *p = EXPECT_MAP(mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	memset(p, 'a', 3 * pg);
	char *q = EXPECT_MAP(mmap(p + pg, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
	EXPECT_TRUE(q == p + pg);
	EXPECT_TRUE(p[0] == 'a' && p[pg - 1] == 'a');
	EXPECT_TRUE(p[pg] == 0 && p[2 * pg - 1] == 0);
	EXPECT_TRUE(p[2 * pg] == 'a' && p[3 * pg - 1] == 'a');

	/* Replace the middle page with a read-only file mapping. */
	int fd = EXPECT(open(FIX("big.bin"), O_RDONLY), 3);
	q = EXPECT_MAP(mmap(p + pg, pg, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, pg));
	EXPECT_TRUE(q == p + pg);
	/* byte i of big.bin is i*7 + i/4096 */
	EXPECT((unsigned char)p[pg], (unsigned char)(4096 * 7 + 1));
	EXPECT((unsigned char)p[pg + 10], (unsigned char)((4096 + 10) * 7 + 1));
	EXPECT(close(fd), 0);

	/* MAP_FIXED_NOREPLACE over existing pages. */
	EXPECT_MAP_ERR(mmap(p, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0), EEXIST);
	EXPECT(munmap(p + 2 * pg, pg), 0);
	q = EXPECT_MAP(mmap(p + 2 * pg, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0));
	EXPECT_TRUE(q == p + 2 * pg);

	/* MAP_FIXED needs an aligned address. */
	EXPECT_MAP_ERR(mmap(p + 1, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), EINVAL);
	EXPECT(munmap(p, 3 * pg), 0);
	return t_done();
}
