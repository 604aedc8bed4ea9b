/* mlock, munlock, mlock2, mlockall, munlockall: the ranges and flags
 * Linux accepts (as root: no RLIMIT_MEMLOCK in the way). */
#include "t.h"
#include <sys/mman.h>

int main(void)
{
	char *p = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT_TRUE(p != MAP_FAILED);
	EXPECT(munmap(p + 2 * 4096, 4096), 0);
	EXPECT(mlock(p, 4096), 0);
	/* An unaligned start rounds down, the length up. */
	EXPECT(mlock(p + 100, 10), 0);
	EXPECT(mlock(p + 4095, 2), 0);
	EXPECT(munlock(p + 100, 4096), 0);
	EXPECT(mlock(p, 0), 0);
	/* A hole (the unmapped third page) is ENOMEM. */
	EXPECT_ERR(mlock(p, 4 * 4096), ENOMEM);
	EXPECT_ERR(munlock(p + 2 * 4096, 1), ENOMEM);
	EXPECT(mlock(p + 3 * 4096, 4096), 0);
	EXPECT_ERR(syscall(SYS_mlock, (void *)0x1000, 4096), ENOMEM);
	EXPECT(syscall(SYS_mlock2, p, 4096, 1), 0);
	EXPECT_ERR(syscall(SYS_mlock2, p, 4096, 2), EINVAL);
	EXPECT_ERR(syscall(SYS_mlock2, p, 4 * 4096, 0), ENOMEM);
	EXPECT(mlockall(MCL_CURRENT), 0);
	EXPECT(mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT), 0);
	EXPECT_ERR(mlockall(0), EINVAL);
	EXPECT_ERR(mlockall(MCL_ONFAULT), EINVAL);
	EXPECT_ERR(mlockall(8), EINVAL);
	EXPECT(munlockall(), 0);
	return t_done();
}
