/* SA_RESETHAND, SA_NODEFER and the handler's own mask (sa_mask). */
#include "t.h"

static volatile int depth, max_depth, calls;
static volatile int blocked_in_handler, usr2_blocked;

static void nested(int sig)
{
	calls++;
	depth++;
	if (depth > max_depth)
		max_depth = depth;
	sigset_t cur;
	sigprocmask(SIG_BLOCK, NULL, &cur);
	blocked_in_handler = sigismember(&cur, sig);
	usr2_blocked = sigismember(&cur, SIGUSR2);
	if (calls == 1)
		raise(sig);
	depth--;
}

static volatile int reset_calls;
static void once(int sig) { (void)sig; reset_calls++; }

int main(void)
{
	struct sigaction sa, old;
	t_as_child(); /* dies of its own signal: not as init */
	memset(&sa, 0, sizeof sa);

	/* Default: the signal is blocked while its handler runs, so the raise
	 * inside the handler is delivered after it returns (no nesting). */
	sa.sa_handler = nested;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGUSR2);
	EXPECT(sigaction(SIGUSR1, &sa, NULL), 0);
	EXPECT(raise(SIGUSR1), 0);
	EXPECT(calls, 2);
	EXPECT(max_depth, 1);
	EXPECT(blocked_in_handler, 1);
	EXPECT(usr2_blocked, 1);

	/* SA_NODEFER: it nests. */
	calls = max_depth = depth = 0;
	sa.sa_flags = SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	EXPECT(sigaction(SIGUSR1, &sa, NULL), 0);
	EXPECT(raise(SIGUSR1), 0);
	EXPECT(calls, 2);
	EXPECT(max_depth, 2);
	EXPECT(blocked_in_handler, 0);
	EXPECT(usr2_blocked, 0);
	/* The mask after return is the one before. */
	sigset_t cur;
	sigprocmask(SIG_BLOCK, NULL, &cur);
	EXPECT(sigismember(&cur, SIGUSR1), 0);

	/* SA_RESETHAND: one call, then the disposition is SIG_DFL again; it
	 * also implies SA_NODEFER on Linux. */
	sa.sa_handler = once;
	sa.sa_flags = SA_RESETHAND;
	EXPECT(sigaction(SIGUSR2, &sa, NULL), 0);
	EXPECT(raise(SIGUSR2), 0);
	EXPECT(reset_calls, 1);
	EXPECT(sigaction(SIGUSR2, NULL, &old), 0);
	EXPECT_TRUE(old.sa_handler == SIG_DFL);
	/* Linux resets only the handler; the flags read back unchanged. */
	EXPECT_TRUE((old.sa_flags & SA_RESETHAND) != 0);

	/* SIG_IGN discards; a pending blocked signal is dropped when set to
	 * SIG_IGN. */
	sigset_t s, pend;
	sigemptyset(&s);
	sigaddset(&s, SIGUSR2);
	EXPECT(sigprocmask(SIG_BLOCK, &s, NULL), 0);
	EXPECT(raise(SIGUSR2), 0);
	EXPECT(sigpending(&pend), 0);
	EXPECT(sigismember(&pend, SIGUSR2), 1);
	EXPECT_TRUE(signal(SIGUSR2, SIG_IGN) == SIG_DFL);
	EXPECT(sigpending(&pend), 0);
	EXPECT(sigismember(&pend, SIGUSR2), 0);
	EXPECT(sigprocmask(SIG_UNBLOCK, &s, NULL), 0);

	/* SIGKILL and SIGSTOP cannot be caught. */
	EXPECT_ERR(sigaction(SIGKILL, &sa, NULL), EINVAL);
	EXPECT_ERR(sigaction(SIGSTOP, &sa, NULL), EINVAL);

	/* Finally the reset SIGUSR2 handler ... was set to SIG_IGN; set it to
	 * SIG_DFL and raise: the default action terminates (status 140). */
	signal(SIGUSR2, SIG_DFL);
	SHOW("raising SIGUSR2 with default action");
	t_done();
	raise(SIGUSR2);
	SHOW("still alive: wrong");
	return 0;
}
