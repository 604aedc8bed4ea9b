/* mprotect: changing protections, alignment and range errors. */
#include "t.h"

int main(void)
{
	long pg = 4096;
	char *p = EXPECT_MAP(mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	p[0] = 'z';
	EXPECT(mprotect(p, pg, PROT_READ), 0);
	EXPECT(p[0], 'z');
	EXPECT(mprotect(p, pg, PROT_READ | PROT_WRITE), 0);
	p[0] = 'y';
	EXPECT(p[0], 'y');
	/* Length rounded up; PROT_NONE then back. */
	EXPECT(mprotect(p + pg, 1, PROT_NONE), 0);
	EXPECT(mprotect(p + pg, pg, PROT_READ | PROT_WRITE | PROT_EXEC), 0);
	p[pg] = 1;
	EXPECT(mprotect(p, 0, PROT_READ), 0);

	EXPECT_ERR(mprotect(p + 1, pg, PROT_READ), EINVAL);
	EXPECT_ERR(mprotect(p, pg, 0x100), EINVAL);
	/* Range with an unmapped hole. */
	EXPECT(munmap(p + 2 * pg, pg), 0);
	EXPECT_ERR(mprotect(p, 4 * pg, PROT_READ), ENOMEM);
	EXPECT_ERR(mprotect(p + 2 * pg, pg, PROT_READ), ENOMEM);
	EXPECT(munmap(p, 4 * pg), 0);
	/* A read-only mapping becomes writable on request (private). */
	int fd = EXPECT(open(FIX("file.txt"), O_RDONLY), 3);
	char *f = EXPECT_MAP(mmap(NULL, pg, PROT_READ, MAP_PRIVATE, fd, 0));
	EXPECT(mprotect(f, pg, PROT_READ | PROT_WRITE), 0);
	f[0] = 'H';
	SHOW("patched private copy: %.5s", f);
	EXPECT(munmap(f, pg), 0);
	EXPECT(close(fd), 0);
	return t_done();
}
