/* rt_sigaction: install, read back, run, ignore, and argument errors. */
#include "t.h"

static volatile sig_atomic_t hits, last_sig;

static void handler(int sig)
{
	hits++;
	last_sig = sig;
}

static void info_handler(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	hits++;
	last_sig = sig + (si->si_signo == sig ? 1000 : 0) + (si->si_code == SI_TKILL ? 10000 : 0);
}

int main(void)
{
	struct sigaction sa, old;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGUSR2);
	EXPECT(sigaction(SIGUSR1, &sa, NULL), 0);
	memset(&old, 0, sizeof old);
	EXPECT(sigaction(SIGUSR1, NULL, &old), 0);
	EXPECT_TRUE(old.sa_handler == handler);
	/* glibc adds SA_RESTORER itself; compare the rest. */
	SHOW("flags: %#x", (unsigned)(old.sa_flags & ~0x04000000 /* SA_RESTORER */));
	EXPECT_TRUE(sigismember(&old.sa_mask, SIGUSR2) && !sigismember(&old.sa_mask, SIGINT));

	EXPECT(raise(SIGUSR1), 0);
	EXPECT(hits, 1);
	EXPECT(last_sig, SIGUSR1);
	EXPECT(kill(getpid(), SIGUSR1), 0);
	EXPECT(hits, 2);

	/* SA_SIGINFO with details. */
	sa.sa_sigaction = info_handler;
	sa.sa_flags = SA_SIGINFO;
	EXPECT(sigaction(SIGUSR2, &sa, &old), 0);
	EXPECT_TRUE(old.sa_handler == SIG_DFL);
	EXPECT(syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGUSR2), 0);
	EXPECT(last_sig, SIGUSR2 + 1000 + 10000);

	/* SIG_IGN: the signal is discarded. Default of SIGCHLD is ignore too. */
	sa.sa_handler = SIG_IGN;
	sa.sa_flags = 0;
	EXPECT(sigaction(SIGTERM, &sa, NULL), 0);
	EXPECT(kill(getpid(), SIGTERM), 0);
	EXPECT(raise(SIGCHLD), 0);
	EXPECT(raise(SIGWINCH), 0);
	SHOW("survived ignored signals");
	/* SA_RESETHAND: one shot, then back to default. */
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESETHAND;
	EXPECT(sigaction(SIGHUP, &sa, NULL), 0);
	EXPECT(raise(SIGHUP), 0);
	EXPECT(sigaction(SIGHUP, NULL, &old), 0);
	EXPECT_TRUE(old.sa_handler == SIG_DFL);

	/* Errors. */
	EXPECT_ERR(sigaction(SIGKILL, &sa, NULL), EINVAL);
	EXPECT_ERR(sigaction(SIGSTOP, &sa, NULL), EINVAL);
	EXPECT(sigaction(SIGKILL, NULL, &old), 0);
	EXPECT_ERR(sigaction(0, &sa, NULL), EINVAL);
	EXPECT_ERR(sigaction(65, &sa, NULL), EINVAL);
	EXPECT_ERR(syscall(SYS_rt_sigaction, 200, NULL, &old, 8), EINVAL);
	EXPECT_ERR(syscall(SYS_rt_sigaction, SIGUSR1, NULL, &old, 4), EINVAL);
	EXPECT_ERR(syscall(SYS_rt_sigaction, SIGUSR1, BADPTR, NULL, 8), EFAULT);
	EXPECT_ERR(syscall(SYS_rt_sigaction, SIGUSR1, NULL, BADPTR, 8), EFAULT);
	EXPECT_ERR(kill(getpid(), 65), EINVAL);
	/* Signal 0 only checks existence. */
	EXPECT(kill(getpid(), 0), 0);
	EXPECT(hits, 4);
	return t_done();
}
