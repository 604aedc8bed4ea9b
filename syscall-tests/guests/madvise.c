/* madvise(MADV_DONTNEED) zeroes private anonymous memory, not shared. */
#include "t.h"

int main(void)
{
	long pg = 4096;
	char *p = EXPECT_MAP(mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	memset(p, 'q', 4 * pg);
	EXPECT(madvise(p + pg, 2 * pg, MADV_DONTNEED), 0);
	EXPECT_TRUE(p[0] == 'q' && p[pg - 1] == 'q');
	EXPECT_TRUE(p[pg] == 0 && p[3 * pg - 1] == 0);
	EXPECT_TRUE(p[3 * pg] == 'q');

	char *s = EXPECT_MAP(mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
	memset(s, 's', pg);
	EXPECT(madvise(s, pg, MADV_DONTNEED), 0);
	EXPECT_TRUE(s[0] == 's');

	/* Private file mapping: the private copy is dropped, file data returns. */
	int fd = EXPECT(open(FIX("file.txt"), O_RDONLY), 3);
	char *f = EXPECT_MAP(mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0));
	f[0] = 'J';
	EXPECT(madvise(f, pg, MADV_DONTNEED), 0);
	SHOW("after DONTNEED: %.5s", f);
	EXPECT(close(fd), 0);

	EXPECT(madvise(p, 4 * pg, MADV_NORMAL), 0);
	EXPECT(madvise(p, 4 * pg, MADV_WILLNEED), 0);
	EXPECT(madvise(p, 4 * pg, MADV_SEQUENTIAL), 0);
	EXPECT(madvise(p, 0, MADV_DONTNEED), 0);
	EXPECT_ERR(madvise(p + 1, pg, MADV_DONTNEED), EINVAL);
	EXPECT_ERR(madvise(p, pg, 12345), EINVAL);
	EXPECT(munmap(p + pg, pg), 0);
	EXPECT_ERR(madvise(p, 4 * pg, MADV_NORMAL), ENOMEM);
	EXPECT(munmap(p, 4 * pg), 0);
	return t_done();
}
