/* POSIX timers with SIGEV_SIGNAL (si_code SI_TIMER, si_value, overruns),
 * timer_gettime/settime/delete, and setitimer/getitimer ITIMER_REAL. */
#include "t.h"
#include <sys/time.h>
#include <time.h>

static volatile int fired, code, val;
static void on_timer(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	fired++;
	code = si->si_code;
	val = si->si_value.sival_int;
}
static volatile int alarms;
static void on_alrm(int s) { (void)s; alarms++; }

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_timer;
	sa.sa_flags = SA_SIGINFO;
	EXPECT(sigaction(SIGRTMIN, &sa, NULL), 0);
	struct sigevent sev;
	memset(&sev, 0, sizeof sev);
	sev.sigev_notify = SIGEV_SIGNAL;
	sev.sigev_signo = SIGRTMIN;
	sev.sigev_value.sival_int = 99;
	timer_t t;
	EXPECT(timer_create(CLOCK_MONOTONIC, &sev, &t), 0);
	struct itimerspec its = {{0, 0}, {0, 100000000}}, cur;
	EXPECT(timer_settime(t, 0, &its, NULL), 0);
	EXPECT(timer_gettime(t, &cur), 0);
	EXPECT_TRUE(cur.it_value.tv_sec == 0 && cur.it_value.tv_nsec > 0);
	while (!fired)
		pause();
	EXPECT(fired, 1);
	EXPECT(code, SI_TIMER);
	EXPECT(val, 99);
	EXPECT(timer_gettime(t, &cur), 0);
	EXPECT_TRUE(cur.it_value.tv_sec == 0 && cur.it_value.tv_nsec == 0);

	/* Periodic, with the signal blocked: one pending signal, overruns
	 * count the rest. */
	sigset_t blk;
	sigemptyset(&blk);
	sigaddset(&blk, SIGRTMIN);
	sigprocmask(SIG_BLOCK, &blk, NULL);
	struct itimerspec per = {{0, 20000000}, {0, 20000000}};
	EXPECT(timer_settime(t, 0, &per, NULL), 0);
	usleep(210000);
	siginfo_t si;
	struct timespec zero = {0, 0};
	EXPECT(sigtimedwait(&blk, &si, &zero), SIGRTMIN);
	EXPECT(si.si_code, SI_TIMER);
	/* About 9 expirations in 210 ms: one signal, the rest counted as
	 * overruns (more under load, never fewer). */
	EXPECT_TRUE(si.si_overrun >= 5 && si.si_overrun < 1000);
	struct itimerspec off = {{0, 0}, {0, 0}}, old;
	EXPECT(timer_settime(t, 0, &off, &old), 0);
	EXPECT(old.it_interval.tv_nsec, 20000000);
	/* One more expiry may have been queued between the wait and the
	 * disarm (the period is short and the machine may be busy); after
	 * it, nothing: the expiries above were one signal, not a queue. */
	(void)sigtimedwait(&blk, &si, &zero);
	struct timespec wait50 = {0, 50000000};
	EXPECT_ERR(sigtimedwait(&blk, &si, &wait50), EAGAIN);
	EXPECT(timer_delete(t), 0);
	EXPECT_ERR(timer_delete(t), EINVAL);
	sigprocmask(SIG_UNBLOCK, &blk, NULL);

	/* Absolute time on CLOCK_REALTIME. */
	fired = 0;
	EXPECT(timer_create(CLOCK_REALTIME, &sev, &t), 0);
	struct itimerspec abs = {{0, 0}, {0, 0}};
	clock_gettime(CLOCK_REALTIME, &abs.it_value);
	abs.it_value.tv_nsec += 50000000;
	if (abs.it_value.tv_nsec >= 1000000000) {
		abs.it_value.tv_sec++;
		abs.it_value.tv_nsec -= 1000000000;
	}
	EXPECT(timer_settime(t, TIMER_ABSTIME, &abs, NULL), 0);
	while (!fired)
		pause();
	EXPECT(fired, 1);
	EXPECT(timer_delete(t), 0);
	/* SIGEV_NONE: just a clock to read. */
	sev.sigev_notify = SIGEV_NONE;
	EXPECT(timer_create(CLOCK_MONOTONIC, &sev, &t), 0);
	its.it_value.tv_sec = 10;
	its.it_value.tv_nsec = 0;
	EXPECT(timer_settime(t, 0, &its, NULL), 0);
	EXPECT(timer_gettime(t, &cur), 0);
	EXPECT_TRUE(cur.it_value.tv_sec >= 9 && cur.it_value.tv_sec <= 10);
	EXPECT(timer_delete(t), 0);
	/* Errors. */
	EXPECT_ERR(timer_create(12345, NULL, &t), EINVAL);
	sev.sigev_notify = SIGEV_SIGNAL;
	sev.sigev_signo = 200;
	EXPECT_ERR(timer_create(CLOCK_MONOTONIC, &sev, &t), EINVAL);

	/* setitimer ITIMER_REAL: periodic SIGALRM, getitimer, disarm. */
	signal(SIGALRM, on_alrm);
	struct itimerval iv = {{0, 30000}, {0, 30000}}, ov;
	EXPECT(setitimer(ITIMER_REAL, &iv, NULL), 0);
	EXPECT(getitimer(ITIMER_REAL, &ov), 0);
	EXPECT(ov.it_interval.tv_usec, 30000);
	EXPECT_TRUE(ov.it_value.tv_sec == 0 && ov.it_value.tv_usec > 0 && ov.it_value.tv_usec <= 30000);
	while (alarms < 3)
		pause();
	struct itimerval stop = {{0, 0}, {0, 0}};
	EXPECT(setitimer(ITIMER_REAL, &stop, &ov), 0);
	EXPECT(ov.it_interval.tv_usec, 30000);
	int a = alarms;
	usleep(100000);
	EXPECT_TRUE(alarms == a);
	/* alarm() returns the seconds left of a previous one. */
	EXPECT(alarm(10), 0);
	EXPECT(alarm(0), 10);
	/* ITIMER_VIRTUAL counts user CPU time. */
	iv.it_interval.tv_usec = 0;
	iv.it_value.tv_usec = 10000;
	signal(SIGVTALRM, on_alrm);
	alarms = 0;
	EXPECT(setitimer(ITIMER_VIRTUAL, &iv, NULL), 0);
	volatile unsigned long spin = 0;
	while (!alarms)
		spin++;
	EXPECT(alarms, 1);
	EXPECT_ERR(setitimer(7, &iv, NULL), EINVAL);
	return t_done();
}
