/* sysinfo, times, getrusage: calls succeed with plausible values. */
#include "t.h"
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <sys/times.h>

int main(void)
{
	struct sysinfo si;
	EXPECT(sysinfo(&si), 0);
	EXPECT_TRUE(si.uptime > 0);
	EXPECT_TRUE(si.totalram > 0 && si.mem_unit >= 1);
	EXPECT_TRUE(si.freeram <= si.totalram);
	EXPECT_TRUE(si.procs >= 1);
	EXPECT_ERR(syscall(SYS_sysinfo, BADPTR), EFAULT);

	/* Burn a little CPU so user time can be non-zero. */
	volatile unsigned long x = 0;
	for (unsigned long i = 0; i < 20000000; i++)
		x += i;
	struct tms t;
	clock_t c = times(&t);
	EXPECT_TRUE(c != (clock_t)-1);
	EXPECT_TRUE(t.tms_cutime == 0 && t.tms_cstime == 0);
	EXPECT_TRUE(times(NULL) != (clock_t)-1);
	EXPECT_TRUE(sysconf(_SC_CLK_TCK) == 100);
	EXPECT_ERR(syscall(SYS_times, BADPTR), EFAULT);

	struct rusage ru;
	EXPECT(getrusage(RUSAGE_SELF, &ru), 0);
	EXPECT_TRUE(ru.ru_utime.tv_usec < 1000000 && ru.ru_stime.tv_usec < 1000000);
	EXPECT_TRUE(ru.ru_maxrss > 0);
	EXPECT(getrusage(RUSAGE_CHILDREN, &ru), 0);
	EXPECT_TRUE(ru.ru_utime.tv_sec == 0 && ru.ru_utime.tv_usec == 0);
	EXPECT(getrusage(RUSAGE_THREAD, &ru), 0);
	EXPECT_ERR(getrusage(42, &ru), EINVAL);
	EXPECT_ERR(syscall(SYS_getrusage, RUSAGE_SELF, BADPTR), EFAULT);
	return t_done();
}
