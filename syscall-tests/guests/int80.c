/* `int $0x80` (the 32-bit system call ABI) from 64-bit code. Linux runs
 * the 32-bit call; the sandbox implements no 32-bit ABI and answers ENOSYS
 * on every platform, the process going on. Run with "sandbox" (by
 * tests/differential.rs, in the sandbox only); plain, only the 64-bit
 * calls around it are compared. */
#include "t.h"

static long int80(long nr)
{
	long r;
	__asm__ volatile("int $0x80" : "=a"(r) : "a"(nr) : "memory");
	return r;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "sandbox") == 0) {
		/* 20 is getpid and 1 exit in the 32-bit table. */
		EXPECT(int80(20), -ENOSYS);
		EXPECT(int80(1), -ENOSYS);
		EXPECT(int80(0xffff), -ENOSYS);
	}
	EXPECT_TRUE(syscall(SYS_getppid) >= 0);
	return t_done();
}
