/* Writing to a read-only page kills the program with SIGSEGV (exit 139). */
#include "t.h"

int main(void)
{
	volatile char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT_TRUE(p != MAP_FAILED);
	p[0] = 1;
	EXPECT(mprotect((void *)p, 4096, PROT_READ), 0);
	EXPECT(p[0], 1);
	SHOW("writing to a read-only page");
	fflush(stdout);
	p[0] = 2;
	SHOW("still alive: wrong");
	return 1;
}
