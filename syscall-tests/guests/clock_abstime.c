/* clock_nanosleep: relative and TIMER_ABSTIME on MONOTONIC and REALTIME,
 * a deadline in the past returns at once, interruption reports the
 * remaining time only for relative sleeps, and errors come back as values. */
#include "t.h"
#include <sys/time.h>
#include <time.h>

static long ms_between(struct timespec *a, struct timespec *b)
{
	return (b->tv_sec - a->tv_sec) * 1000 + (b->tv_nsec - a->tv_nsec) / 1000000;
}

static void add_ms(struct timespec *t, long ms)
{
	t->tv_nsec += ms * 1000000;
	while (t->tv_nsec >= 1000000000) {
		t->tv_sec++;
		t->tv_nsec -= 1000000000;
	}
}

static void on_alrm(int s) { (void)s; }

int main(void)
{
	struct timespec t0, t1, dl, rel = {0, 100000000}, rem;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	EXPECT_RC(clock_nanosleep(CLOCK_MONOTONIC, 0, &rel, NULL), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long ms = ms_between(&t0, &t1);
	EXPECT_TRUE(ms >= 100 && ms < 2000);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	dl = t0;
	add_ms(&dl, 150);
	EXPECT_RC(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &dl, NULL), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	EXPECT_TRUE(t1.tv_sec > dl.tv_sec || (t1.tv_sec == dl.tv_sec && t1.tv_nsec >= dl.tv_nsec));
	EXPECT_TRUE(ms_between(&t0, &t1) < 2000);

	clock_gettime(CLOCK_REALTIME, &dl);
	add_ms(&dl, 100);
	EXPECT_RC(clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &dl, NULL), 0);
	clock_gettime(CLOCK_REALTIME, &t1);
	EXPECT_TRUE(t1.tv_sec > dl.tv_sec || (t1.tv_sec == dl.tv_sec && t1.tv_nsec >= dl.tv_nsec));
	/* BOOTTIME too. */
	clock_gettime(CLOCK_BOOTTIME, &dl);
	add_ms(&dl, 50);
	EXPECT_RC(clock_nanosleep(CLOCK_BOOTTIME, TIMER_ABSTIME, &dl, NULL), 0);

	/* Past deadline: immediate. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	dl = t0;
	dl.tv_sec -= 5;
	EXPECT_RC(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &dl, NULL), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	EXPECT_TRUE(ms_between(&t0, &t1) < 50);

	/* Interrupted: EINTR; relative sleeps write the remainder. */
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alrm;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = {{0, 0}, {0, 100000}};
	setitimer(ITIMER_REAL, &it, NULL);
	rel.tv_sec = 2;
	rel.tv_nsec = 0;
	rem.tv_sec = rem.tv_nsec = -1;
	EXPECT_RC(clock_nanosleep(CLOCK_MONOTONIC, 0, &rel, &rem), EINTR);
	EXPECT_TRUE(rem.tv_sec >= 1 && rem.tv_sec <= 2);
	setitimer(ITIMER_REAL, &it, NULL);
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += 2;
	rem.tv_sec = rem.tv_nsec = -1;
	EXPECT_RC(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &dl, &rem), EINTR);
	EXPECT_TRUE(rem.tv_sec == -1);
	/* nanosleep's remainder too. */
	setitimer(ITIMER_REAL, &it, NULL);
	EXPECT_ERR(nanosleep(&rel, &rem), EINTR);
	EXPECT_TRUE(rem.tv_sec >= 1 && rem.tv_sec <= 2);

	/* Errors are returned, not put in errno. */
	struct timespec bad = {0, 1000000000};
	EXPECT_RC(clock_nanosleep(CLOCK_MONOTONIC, 0, &bad, NULL), EINVAL);
	EXPECT_RC(clock_nanosleep(12345, 0, &rel, NULL), EINVAL);
	EXPECT_RC(clock_nanosleep(CLOCK_THREAD_CPUTIME_ID, 0, &rel, NULL), EINVAL);
	bad.tv_nsec = -1;
	EXPECT_RC(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &bad, NULL), EINVAL);
	EXPECT_RC(clock_nanosleep(CLOCK_MONOTONIC, 0, BADPTR, NULL), EFAULT);
	return t_done();
}
