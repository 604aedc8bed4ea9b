/* si_code and si_addr of synchronous faults: SEGV_MAPERR on an unmapped
 * page, SEGV_ACCERR on PROT_NONE and read-only pages, FPE_INTDIV on integer
 * division by zero (caught, then escaped with siglongjmp). */
#include "t.h"
#include <setjmp.h>

static sigjmp_buf env;
static volatile int code, signo;
static void *volatile addr;

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	signo = sig;
	code = si->si_code;
	addr = si->si_addr;
	siglongjmp(env, 1);
}

__attribute__((noinline)) static int divide(int a, int b) { return a / b; }

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO;
	EXPECT(sigaction(SIGSEGV, &sa, NULL), 0);
	EXPECT(sigaction(SIGFPE, &sa, NULL), 0);

	char *m = EXPECT_MAP(mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	EXPECT(munmap(m + 4096, 4096), 0);
	EXPECT(mprotect(m + 2 * 4096, 4096, PROT_READ), 0);

	if (sigsetjmp(env, 1) == 0)
		((volatile char *)m)[4096 + 17] = 1;
	EXPECT(signo, SIGSEGV);
	EXPECT(code, SEGV_MAPERR);
	EXPECT_TRUE(addr == m + 4096 + 17);

	if (sigsetjmp(env, 1) == 0)
		((volatile char *)m)[2 * 4096 + 5] = 1;
	EXPECT(code, SEGV_ACCERR);
	EXPECT_TRUE(addr == m + 2 * 4096 + 5);

	EXPECT(mprotect(m, 4096, PROT_NONE), 0);
	signo = 0;
	if (sigsetjmp(env, 1) == 0)
		(void)((volatile char *)m)[100];
	EXPECT(signo, SIGSEGV);
	EXPECT(code, SEGV_ACCERR);
	EXPECT_TRUE(addr == m + 100);

	/* Kernel-space address: SEGV_MAPERR, si_addr as given. */
	if (sigsetjmp(env, 1) == 0)
		(void)*(volatile char *)0xffff800000001000UL;
	EXPECT(signo, SIGSEGV);

	volatile int zero = 0;
	signo = 0;
	if (sigsetjmp(env, 1) == 0)
		SHOW("quotient %d: wrong", divide(10, zero));
	EXPECT(signo, SIGFPE);
	EXPECT(code, FPE_INTDIV);
	EXPECT_TRUE((char *)addr >= (char *)divide && (char *)addr < (char *)divide + 64);
	/* INT_MIN / -1 overflows: also SIGFPE (si_code FPE_INTDIV on x86). */
	volatile int mn = INT_MIN, m1 = -1;
	signo = 0;
	if (sigsetjmp(env, 1) == 0)
		SHOW("quotient %d: wrong", divide(mn, m1));
	EXPECT(signo, SIGFPE);
	EXPECT(code, FPE_INTDIV);

	/* The handler mask was restored by siglongjmp each time. */
	sigset_t cur;
	sigprocmask(SIG_BLOCK, NULL, &cur);
	EXPECT(sigismember(&cur, SIGSEGV) || sigismember(&cur, SIGFPE), 0);
	return t_done();
}
