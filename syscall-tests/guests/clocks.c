/* clock_gettime/clock_getres/gettimeofday/time: plausibility, not values. */
#include "t.h"
#include <sys/time.h>
#include <time.h>

static long long ns(struct timespec t)
{
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(void)
{
	struct timespec a, b;
	int monotonic = 1;
	EXPECT(clock_gettime(CLOCK_MONOTONIC, &a), 0);
	for (int i = 0; i < 1000; i++) {
		monotonic &= clock_gettime(CLOCK_MONOTONIC, &b) == 0;
		monotonic &= ns(b) >= ns(a) && b.tv_nsec < 1000000000;
		a = b;
	}
	EXPECT_TRUE(monotonic);
	/* Raw syscalls too, past any vDSO. */
	struct timespec r1, r2;
	EXPECT(syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &r1), 0);
	EXPECT(syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &r2), 0);
	EXPECT_TRUE(ns(r2) >= ns(r1) && r1.tv_nsec < 1000000000);

	struct timespec rt;
	EXPECT(clock_gettime(CLOCK_REALTIME, &rt), 0);
	/* After 2024-01-01, before 2100. */
	EXPECT_TRUE(rt.tv_sec > 1704067200 && rt.tv_sec < 4102444800);
	struct timeval tv;
	EXPECT(gettimeofday(&tv, NULL), 0);
	EXPECT_TRUE(tv.tv_sec - rt.tv_sec >= 0 && tv.tv_sec - rt.tv_sec < 5 && tv.tv_usec < 1000000);
	time_t t = time(NULL);
	EXPECT_TRUE(t - rt.tv_sec >= 0 && t - rt.tv_sec < 5);
	time_t t2;
	EXPECT_TRUE(syscall(SYS_time, &t2) >= rt.tv_sec && t2 >= rt.tv_sec);

	EXPECT(clock_gettime(CLOCK_BOOTTIME, &b), 0);
	EXPECT(clock_gettime(CLOCK_MONOTONIC_RAW, &b), 0);
	EXPECT(clock_gettime(CLOCK_MONOTONIC_COARSE, &b), 0);
	EXPECT(clock_gettime(CLOCK_REALTIME_COARSE, &b), 0);
	EXPECT(clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b), 0);
	EXPECT(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b), 0);
	EXPECT_TRUE(ns(b) > 0);

	struct timespec res;
	EXPECT(clock_getres(CLOCK_MONOTONIC, &res), 0);
	SHOW("res monotonic: %ld.%09ld", (long)res.tv_sec, res.tv_nsec);
	EXPECT(clock_getres(CLOCK_REALTIME, &res), 0);
	SHOW("res realtime: %ld.%09ld", (long)res.tv_sec, res.tv_nsec);
	EXPECT(clock_getres(CLOCK_MONOTONIC, NULL), 0);

	EXPECT_ERR(syscall(SYS_clock_gettime, 12345, &b), EINVAL);
	EXPECT_ERR(syscall(SYS_clock_gettime, CLOCK_MONOTONIC, BADPTR), EFAULT);
	EXPECT_ERR(syscall(SYS_clock_getres, 12345, &res), EINVAL);
	EXPECT_ERR(syscall(SYS_gettimeofday, BADPTR, NULL), EFAULT);
	EXPECT_ERR(syscall(SYS_time, BADPTR), EFAULT);
	return t_done();
}
