/* remap_file_pages(2), as Linux has emulated it since 4.0: a page of a
 * shared file mapping shows another page of the file, writes through it
 * reach that page; prot must be 0; private, unmapped, empty and wrapping
 * ranges are EINVAL. */
#include "t.h"

#define PG 4096

static void check(int fd, const char *what)
{
	char *p = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	EXPECT_TRUE(p != MAP_FAILED);
	EXPECT(p[0], 'A');
	EXPECT(remap_file_pages(p, PG, 0, 3, 0), 0);
	SHOW("%s: first page now %c, second %c", what, p[0], p[PG]);
	p[1] = 'x';
	char c = 0;
	EXPECT(pread(fd, &c, 1, 3 * PG + 1), 1);
	EXPECT(c, 'x');
	/* Two pages, the second of them of the same mapping. */
	EXPECT(remap_file_pages(p + 2 * PG, 2 * PG, 0, 0, 0), 0);
	SHOW("%s: pages 3 and 4 now %c%c", what, p[2 * PG], p[3 * PG]);
	EXPECT_ERR(remap_file_pages(p, PG, PROT_READ, 1, 0), EINVAL);
	EXPECT_ERR(remap_file_pages(p, 0, 0, 1, 0), EINVAL);
	EXPECT_ERR(remap_file_pages(p, PG, 0, ~0UL, 0), EINVAL);
	/* Past the end of the mapping. */
	EXPECT_ERR(remap_file_pages(p + 3 * PG, 2 * PG, 0, 0, 0), EINVAL);
	munmap(p, 4 * PG);
	char *q = mmap(NULL, PG, PROT_READ, MAP_PRIVATE, fd, 0);
	EXPECT_ERR(remap_file_pages(q, PG, 0, 1, 0), EINVAL);
	munmap(q, PG);
	EXPECT_ERR(remap_file_pages(q, PG, 0, 1, 0), EINVAL);
}

static void fill(int fd)
{
	char buf[PG];
	for (int i = 0; i < 4; i++) {
		memset(buf, 'A' + i, PG);
		if (pwrite(fd, buf, PG, (off_t)i * PG) != PG)
			perror("pwrite");
	}
}

int main(void)
{
	int m = memfd_create("rfp", 0);
	fill(m);
	check(m, "memfd");
	close(m);
	char path[] = "/tmp/rfp.XXXXXX";
	int f = mkstemp(path);
	fill(f);
	check(f, "tmp file");
	close(f);
	unlink(path);
	return t_done();
}
