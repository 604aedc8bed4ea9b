/* rt_sigprocmask/rt_sigpending: blocking, pending, delivery on unblock. */
#include "t.h"

static volatile sig_atomic_t hits;

static void handler(int sig)
{
	(void)sig;
	hits++;
}

int main(void)
{
	sigset_t set, old, cur;
	signal(SIGUSR1, handler);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	EXPECT(sigprocmask(SIG_BLOCK, &set, &old), 0);
	EXPECT_TRUE(!sigismember(&old, SIGUSR1));
	EXPECT(sigprocmask(SIG_BLOCK, NULL, &cur), 0);
	EXPECT_TRUE(sigismember(&cur, SIGUSR1));

	/* A blocked signal stays pending. */
	EXPECT(raise(SIGUSR1), 0);
	EXPECT(hits, 0);
	sigset_t pend;
	EXPECT(sigpending(&pend), 0);
	EXPECT_TRUE(sigismember(&pend, SIGUSR1) && !sigismember(&pend, SIGUSR2));
	/* Standard signals do not queue: two raises, one delivery. */
	EXPECT(raise(SIGUSR1), 0);
	EXPECT(sigprocmask(SIG_UNBLOCK, &set, NULL), 0);
	EXPECT(hits, 1);
	EXPECT(sigpending(&pend), 0);
	EXPECT_TRUE(!sigismember(&pend, SIGUSR1));

	/* SIG_SETMASK; SIGKILL and SIGSTOP cannot be blocked (silently). */
	sigfillset(&set);
	EXPECT(sigprocmask(SIG_SETMASK, &set, NULL), 0);
	EXPECT(sigprocmask(SIG_SETMASK, NULL, &cur), 0);
	EXPECT_TRUE(!sigismember(&cur, SIGKILL) && !sigismember(&cur, SIGSTOP));
	EXPECT_TRUE(sigismember(&cur, SIGTERM) && sigismember(&cur, SIGRTMAX));
	/* Raw mask as the kernel stores it. */
	unsigned long raw = 0;
	EXPECT(syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &raw, 8), 0);
	SHOW("raw mask: %#lx", raw);
	sigemptyset(&set);
	EXPECT(sigprocmask(SIG_SETMASK, &set, NULL), 0);

	/* Errors. */
	EXPECT_ERR(sigprocmask(42, &set, NULL), EINVAL);
	EXPECT_ERR(syscall(SYS_rt_sigprocmask, SIG_BLOCK, &raw, NULL, 4), EINVAL);
	EXPECT_ERR(syscall(SYS_rt_sigprocmask, SIG_BLOCK, BADPTR, NULL, 8), EFAULT);
	EXPECT_ERR(syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, BADPTR, 8), EFAULT);
	EXPECT_ERR(syscall(SYS_rt_sigpending, &raw, 16), EINVAL);
	/* how is not checked when set is NULL. */
	EXPECT(syscall(SYS_rt_sigprocmask, 42, NULL, &raw, 8), 0);

	/* Real-time signals do queue. */
	signal(SIGRTMIN, handler);
	sigemptyset(&set);
	sigaddset(&set, SIGRTMIN);
	hits = 0;
	EXPECT(sigprocmask(SIG_BLOCK, &set, NULL), 0);
	EXPECT(raise(SIGRTMIN), 0);
	EXPECT(raise(SIGRTMIN), 0);
	EXPECT(raise(SIGRTMIN), 0);
	EXPECT(sigprocmask(SIG_UNBLOCK, &set, NULL), 0);
	EXPECT(hits, 3);
	return t_done();
}
