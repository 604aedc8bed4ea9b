/* sysinfo, times, getrusage: calls succeed with plausible values, and the
 * CPU time of a thread that spins is no more than the time it spun. */
#include "t.h"
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <sys/times.h>
#include <time.h>

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

	/* 300 ms of spinning: the process's CPU time, by its clock and by
	 * getrusage, grew by no more than that (and by something). */
	struct timespec w0, w1, c0, c1;
	struct rusage r0, r1;
	clock_gettime(CLOCK_MONOTONIC, &w0);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
	getrusage(RUSAGE_SELF, &r0);
	do
		clock_gettime(CLOCK_MONOTONIC, &w1);
	while ((w1.tv_sec - w0.tv_sec) * 1000000000L + (w1.tv_nsec - w0.tv_nsec) < 300000000L);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
	getrusage(RUSAGE_SELF, &r1);
	clock_gettime(CLOCK_MONOTONIC, &w1);
	long wall = (w1.tv_sec - w0.tv_sec) * 1000000L + (w1.tv_nsec - w0.tv_nsec) / 1000;
	long clock = (c1.tv_sec - c0.tv_sec) * 1000000L + (c1.tv_nsec - c0.tv_nsec) / 1000;
	long used = (r1.ru_utime.tv_sec + r1.ru_stime.tv_sec - r0.ru_utime.tv_sec - r0.ru_stime.tv_sec) *
			    1000000L +
		    (r1.ru_utime.tv_usec + r1.ru_stime.tv_usec - r0.ru_utime.tv_usec - r0.ru_stime.tv_usec);
	/* (getrusage counts in ticks on some paths: a tick of slack) */
	EXPECT_TRUE(clock > 0 && clock <= wall + 1000);
	EXPECT_TRUE(used <= wall + 10000);
	return t_done();
}
