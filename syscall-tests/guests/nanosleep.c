/* nanosleep/clock_nanosleep: the sleep lasts at least as asked; bad args. */
#include "t.h"
#include <time.h>

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(void)
{
	struct timespec req = {0, 10 * 1000 * 1000}, rem = {7, 7};
	long long t0 = now_ns();
	EXPECT(nanosleep(&req, &rem), 0);
	long long el = now_ns() - t0;
	EXPECT_TRUE(el >= 10 * 1000 * 1000);
	/* A generous bound: a sandbox may be slower, not a thousand times. */
	EXPECT_TRUE(el < 10LL * 1000 * 1000 * 1000);

	struct timespec zero = {0, 0};
	EXPECT(nanosleep(&zero, NULL), 0);

	t0 = now_ns();
	EXPECT_RC(clock_nanosleep(CLOCK_MONOTONIC, 0, &req, NULL), 0);
	EXPECT_TRUE(now_ns() - t0 >= 10 * 1000 * 1000);
	/* Absolute deadline 20ms from now. */
	struct timespec abs;
	clock_gettime(CLOCK_MONOTONIC, &abs);
	t0 = abs.tv_sec * 1000000000LL + abs.tv_nsec;
	abs.tv_nsec += 20 * 1000 * 1000;
	if (abs.tv_nsec >= 1000000000) {
		abs.tv_sec++;
		abs.tv_nsec -= 1000000000;
	}
	EXPECT_RC(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &abs, NULL), 0);
	EXPECT_TRUE(now_ns() - t0 >= 20 * 1000 * 1000);
	/* A deadline in the past returns at once. */
	struct timespec past = {1, 0};
	EXPECT_RC(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &past, NULL), 0);
	EXPECT_RC(clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &past, NULL), 0);

	/* Errors. */
	struct timespec neg = {0, -1}, big = {0, 1000000000}, negsec = {-1, 0};
	EXPECT_ERR(nanosleep(&neg, NULL), EINVAL);
	EXPECT_ERR(nanosleep(&big, NULL), EINVAL);
	EXPECT_ERR(nanosleep(&negsec, NULL), EINVAL);
	EXPECT_ERR(syscall(SYS_nanosleep, BADPTR, NULL), EFAULT);
	EXPECT_RC(clock_nanosleep(CLOCK_THREAD_CPUTIME_ID, 0, &req, NULL), EINVAL);
	EXPECT_RC(clock_nanosleep(12345, 0, &req, NULL), EINVAL);
	EXPECT_RC(clock_nanosleep(CLOCK_MONOTONIC, 0, &big, NULL), EINVAL);
	return t_done();
}
