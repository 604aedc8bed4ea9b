/* brk: query, grow, write, shrink, and refusing to go below the start. */
#include "t.h"

int main(void)
{
	uintptr_t start = (uintptr_t)syscall(SYS_brk, 0);
	EXPECT_TRUE(start != 0);
	/* The raw call returns the new break. */
	uintptr_t grown = (uintptr_t)syscall(SYS_brk, start + 65536);
	EXPECT_TRUE(grown == start + 65536);
	char *area = (char *)start;
	int zero = 1;
	for (int i = 0; i < 65536; i++)
		zero &= area[i] == 0;
	EXPECT_TRUE(zero);
	memset(area, 'b', 65536);
	EXPECT_TRUE(area[65535] == 'b');
	/* Unaligned breaks are kept as given. */
	uintptr_t odd = (uintptr_t)syscall(SYS_brk, start + 70000);
	EXPECT_TRUE(odd == start + 70000);
	area[69999] = 'c';
	/* Shrink, then grow again: the area comes back zeroed. */
	uintptr_t shrunk = (uintptr_t)syscall(SYS_brk, start + 4096);
	EXPECT_TRUE(shrunk == start + 4096);
	EXPECT_TRUE(area[0] == 'b' && area[4095] == 'b');
	grown = (uintptr_t)syscall(SYS_brk, start + 65536);
	EXPECT_TRUE(grown == start + 65536);
	EXPECT_TRUE(area[8192] == 0 && area[65535] == 0);
	/* Below the start of the heap: refused, the break stays. (glibc's static
	 * start-up already moved the break, so only a far lower value is safe.) */
	uintptr_t low = (uintptr_t)syscall(SYS_brk, 0x1000);
	EXPECT_TRUE(low == start + 65536);
	/* Absurd size: refused. */
	uintptr_t huge = (uintptr_t)syscall(SYS_brk, start + (1UL << 46));
	EXPECT_TRUE(huge == start + 65536);
	EXPECT_TRUE((uintptr_t)syscall(SYS_brk, start) == start);
	/* sbrk through glibc as well. */
	void *s = sbrk(0);
	EXPECT_TRUE(s != (void *)-1);
	EXPECT_TRUE(sbrk(8192) == s);
	EXPECT_TRUE(sbrk(0) == (char *)s + 8192);
	memset(s, 1, 8192);
	return t_done();
}
