/* getrlimit/setrlimit/prlimit64, and RLIMIT_NOFILE enforced on dup. */
#include "t.h"
#include <sys/resource.h>

int main(void)
{
	struct rlimit rl, rl2;
	EXPECT(getrlimit(RLIMIT_NOFILE, &rl), 0);
	EXPECT_TRUE(rl.rlim_cur > 3 && rl.rlim_cur <= rl.rlim_max);
	EXPECT(getrlimit(RLIMIT_STACK, &rl2), 0);
	EXPECT(getrlimit(RLIMIT_AS, &rl2), 0);
	EXPECT(getrlimit(RLIMIT_CORE, &rl2), 0);
	EXPECT(prlimit(0, RLIMIT_NOFILE, NULL, &rl2), 0);
	EXPECT_TRUE(rl2.rlim_cur == rl.rlim_cur && rl2.rlim_max == rl.rlim_max);
	EXPECT(prlimit(getpid(), RLIMIT_NOFILE, NULL, &rl2), 0);

	/* Lower the soft limit and read it back. */
	struct rlimit lo = {64, rl.rlim_max};
	EXPECT(setrlimit(RLIMIT_NOFILE, &lo), 0);
	EXPECT(getrlimit(RLIMIT_NOFILE, &rl2), 0);
	EXPECT(rl2.rlim_cur, 64);
	/* prlimit64 sets and returns the old value in one call. */
	struct rlimit lo2 = {32, rl.rlim_max}, old;
	EXPECT(prlimit(0, RLIMIT_NOFILE, &lo2, &old), 0);
	EXPECT(old.rlim_cur, 64);
	/* Descriptors 0..31 only. */
	EXPECT_ERR(dup2(0, 32), EBADF);
	EXPECT_ERR(fcntl(0, F_DUPFD, 32), EINVAL);
	int count = 0;
	while (dup(0) >= 0)
		count++;
	EXPECT_ERR(dup(0), EMFILE);
	EXPECT_ERR(open("/etc/passwd", O_RDONLY), EMFILE);
	SHOW("dups until EMFILE: %d", count);

	/* Errors. */
	struct rlimit bad = {100, 50};
	EXPECT_ERR(setrlimit(RLIMIT_NOFILE, &bad), EINVAL);
	EXPECT_ERR(getrlimit(1000, &rl2), EINVAL);
	EXPECT_ERR(syscall(SYS_getrlimit, RLIMIT_NOFILE, BADPTR), EFAULT);
	EXPECT_ERR(prlimit(0, 1000, NULL, &rl2), EINVAL);
	/* Raising the stack soft limit up to the hard limit is allowed. */
	EXPECT(getrlimit(RLIMIT_STACK, &rl2), 0);
	struct rlimit st = {rl2.rlim_max == RLIM_INFINITY ? 16 << 20 : rl2.rlim_max, rl2.rlim_max};
	EXPECT(setrlimit(RLIMIT_STACK, &st), 0);
	return t_done();
}
