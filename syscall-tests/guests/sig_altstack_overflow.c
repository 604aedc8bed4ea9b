/* A deliberate stack overflow: the SIGSEGV handler can only run on an
 * alternate stack (SA_ONSTACK), and it escapes with siglongjmp. */
#include "t.h"
#include <setjmp.h>
#include <sys/resource.h>

static sigjmp_buf env;
static char altstack[1 << 16];
static volatile int on_alt, code, addr_near_sp;
static volatile char *volatile lowest;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	char local;
	on_alt = &local >= altstack && &local < altstack + sizeof altstack;
	code = si->si_code;
	/* The fault address lies just below the deepest frame reached. */
	addr_near_sp = (char *)si->si_addr <= (char *)lowest &&
		       (char *)lowest - (char *)si->si_addr < (1 << 20);
	siglongjmp(env, sig);
}

static int recurse(int n)
{
	volatile char pad[1024];
	pad[0] = (char)n;
	lowest = pad;
	return recurse(n + 1) + pad[0];
}

int main(void)
{
	/* A small stack makes the overflow quick and deterministic. */
	struct rlimit rl;
	EXPECT(getrlimit(RLIMIT_STACK, &rl), 0);
	rl.rlim_cur = 1 << 20;
	EXPECT(setrlimit(RLIMIT_STACK, &rl), 0);
	stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
	EXPECT(sigaltstack(&ss, NULL), 0);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	EXPECT(sigaction(SIGSEGV, &sa, NULL), 0);
	int sig = sigsetjmp(env, 1);
	if (sig == 0) {
		recurse(0);
		SHOW("recursion ended: wrong");
	}
	EXPECT(sig, SIGSEGV);
	EXPECT(on_alt, 1);
	EXPECT(code, SEGV_MAPERR);
	EXPECT(addr_near_sp, 1);
	/* After siglongjmp we are back on the normal stack. */
	stack_t cur;
	EXPECT(sigaltstack(NULL, &cur), 0);
	EXPECT(cur.ss_flags, 0);
	/* It works a second time. */
	sig = sigsetjmp(env, 1);
	if (sig == 0)
		recurse(0);
	EXPECT(sig, SIGSEGV);
	EXPECT(on_alt, 1);
	return t_done();
}
