/* sigaltstack: set, read back, use from a handler, disable, errors. */
#include "t.h"

static char altstack[65536];
static volatile int on_alt;

static void handler(int sig)
{
	(void)sig;
	char local;
	on_alt = &local >= altstack && &local < altstack + sizeof altstack;
	stack_t cur;
	sigaltstack(NULL, &cur);
	on_alt += (cur.ss_flags & SS_ONSTACK) ? 10 : 0;
}

int main(void)
{
	stack_t ss, old;
	EXPECT(sigaltstack(NULL, &old), 0);
	EXPECT(old.ss_flags, SS_DISABLE);
	ss.ss_sp = altstack;
	ss.ss_size = sizeof altstack;
	ss.ss_flags = 0;
	EXPECT(sigaltstack(&ss, NULL), 0);
	EXPECT(sigaltstack(NULL, &old), 0);
	EXPECT_TRUE(old.ss_sp == altstack);
	EXPECT(old.ss_size, sizeof altstack);
	EXPECT(old.ss_flags, 0);

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	sa.sa_flags = SA_ONSTACK;
	EXPECT(sigaction(SIGUSR1, &sa, NULL), 0);
	EXPECT(raise(SIGUSR1), 0);
	EXPECT(on_alt, 11);
	/* Without SA_ONSTACK the normal stack is used. */
	sa.sa_flags = 0;
	EXPECT(sigaction(SIGUSR1, &sa, NULL), 0);
	EXPECT(raise(SIGUSR1), 0);
	EXPECT(on_alt, 0);

	/* Errors. */
	ss.ss_size = 1024;
	EXPECT_ERR(sigaltstack(&ss, NULL), ENOMEM);
	ss.ss_size = sizeof altstack;
	ss.ss_flags = 0x1234;
	EXPECT_ERR(sigaltstack(&ss, NULL), EINVAL);
	EXPECT_ERR(syscall(SYS_sigaltstack, BADPTR, NULL), EFAULT);
	EXPECT_ERR(syscall(SYS_sigaltstack, NULL, BADPTR), EFAULT);
	/* Disable. */
	ss.ss_flags = SS_DISABLE;
	EXPECT(sigaltstack(&ss, NULL), 0);
	EXPECT(sigaltstack(NULL, &old), 0);
	EXPECT(old.ss_flags, SS_DISABLE);
	return t_done();
}
