/* Waiting for signals: sigsuspend, sigtimedwait (timeout and pending),
 * sigwaitinfo, sigpending, and a signal from another process waking
 * sigsuspend. */
#include "t.h"
#include <sys/wait.h>
#include <time.h>

static volatile int got;
static void on_usr(int sig) { got = sig; }

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr;
	EXPECT(sigaction(SIGUSR1, &sa, NULL), 0);
	EXPECT(sigaction(SIGUSR2, &sa, NULL), 0);

	sigset_t block, empty, pend, old;
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigaddset(&block, SIGUSR2);
	sigemptyset(&empty);
	EXPECT(sigprocmask(SIG_BLOCK, &block, &old), 0);

	/* A child signals us after a while; sigsuspend swaps the mask, waits,
	 * runs the handler and returns EINTR with the old mask back. */
	pid_t c = fork();
	if (c == 0) {
		usleep(100000);
		kill(getppid(), SIGUSR1);
		_exit(0);
	}
	EXPECT_ERR(sigsuspend(&empty), EINTR);
	EXPECT(got, SIGUSR1);
	sigset_t cur;
	sigprocmask(SIG_BLOCK, NULL, &cur);
	EXPECT(sigismember(&cur, SIGUSR1), 1);
	waitpid(c, NULL, 0);

	/* Already pending: sigsuspend returns at once. */
	got = 0;
	EXPECT(raise(SIGUSR2), 0);
	EXPECT(sigpending(&pend), 0);
	EXPECT(sigismember(&pend, SIGUSR2), 1);
	EXPECT(sigismember(&pend, SIGUSR1), 0);
	EXPECT_ERR(sigsuspend(&empty), EINTR);
	EXPECT(got, SIGUSR2);

	/* sigtimedwait: timeout gives EAGAIN after about the timeout. */
	struct timespec ts = {0, 200000000}, t0, t1;
	siginfo_t si;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	EXPECT_ERR(sigtimedwait(&block, &si, &ts), EAGAIN);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	EXPECT_TRUE(ms >= 190 && ms < 2000);
	/* Zero timeout polls. */
	struct timespec zero = {0, 0};
	EXPECT_ERR(sigtimedwait(&block, &si, &zero), EAGAIN);
	/* Pending signal: taken without running the handler. */
	got = 0;
	union sigval v = {.sival_int = 5};
	EXPECT(sigqueue(getpid(), SIGUSR2, v), 0);
	EXPECT(sigtimedwait(&block, &si, &ts), SIGUSR2);
	EXPECT(si.si_signo, SIGUSR2);
	EXPECT(si.si_code, SI_QUEUE);
	EXPECT(si.si_value.sival_int, 5);
	EXPECT(got, 0);
	/* From another process while waiting. */
	c = fork();
	if (c == 0) {
		usleep(100000);
		kill(getppid(), SIGUSR1);
		_exit(0);
	}
	struct timespec longer = {5, 0};
	EXPECT(sigtimedwait(&block, &si, &longer), SIGUSR1);
	EXPECT_TRUE(si.si_pid == c);
	waitpid(c, NULL, 0);
	/* Real-time signals queue; standard ones coalesce. */
	sigset_t rt;
	sigemptyset(&rt);
	sigaddset(&rt, SIGRTMIN + 1);
	EXPECT(sigprocmask(SIG_BLOCK, &rt, NULL), 0);
	for (int i = 0; i < 3; i++) {
		v.sival_int = i;
		sigqueue(getpid(), SIGRTMIN + 1, v);
		raise(SIGUSR1);
	}
	int rts = 0, usr = 0;
	sigaddset(&rt, SIGUSR1);
	while (sigtimedwait(&rt, &si, &zero) > 0) {
		if (si.si_signo == SIGUSR1)
			usr++;
		else
			SHOW("rt value %d", si.si_value.sival_int), rts++;
	}
	EXPECT(rts, 3);
	EXPECT(usr, 1);
	/* Errors. */
	struct timespec bad = {0, 1000000000};
	EXPECT_ERR(sigtimedwait(&block, &si, &bad), EINVAL);
	EXPECT_ERR(syscall(SYS_rt_sigtimedwait, &block, NULL, &zero, 4), EINVAL);
	EXPECT_ERR(syscall(SYS_rt_sigsuspend, &empty, 4), EINVAL);
	return t_done();
}
