/* A SIGSEGV handler sees the faulting address; returning past the fault by
 * longjmp keeps the program alive. Then an illegal instruction: status 132. */
#include "t.h"
#include <setjmp.h>

static sigjmp_buf env;
static void *volatile fault_addr;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	fault_addr = si->si_addr;
	siglongjmp(env, sig);
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO;
	EXPECT(sigaction(SIGSEGV, &sa, NULL), 0);
	EXPECT(sigaction(SIGBUS, &sa, NULL), 0);

	volatile char *bad = (volatile char *)0x1000;
	int sig = sigsetjmp(env, 1);
	if (sig == 0) {
		(void)*bad;
		SHOW("read from 0x1000 did not fault: wrong");
	} else {
		SHOW("caught signal %d at %p", sig, fault_addr);
	}

	/* Write to a read-only file mapping. */
	long pg = 4096;
	int fd = EXPECT(open(FIX("file.txt"), O_RDONLY), 3);
	char *m = EXPECT_MAP(mmap(NULL, pg, PROT_READ, MAP_PRIVATE, fd, 0));
	sig = sigsetjmp(env, 1);
	if (sig == 0) {
		((volatile char *)m)[1] = 'x';
		SHOW("write did not fault: wrong");
	} else {
		EXPECT_TRUE(fault_addr == m + 1);
		SHOW("caught signal %d on read-only write", sig);
	}
	/* Past the end of the file, beyond its last page: SIGBUS. */
	char *big = EXPECT_MAP(mmap(NULL, 4 * pg, PROT_READ, MAP_PRIVATE, fd, 0));
	sig = sigsetjmp(env, 1);
	if (sig == 0) {
		(void)((volatile char *)big)[2 * pg];
		SHOW("read past EOF did not fault: wrong");
	} else {
		EXPECT_TRUE(fault_addr == big + 2 * pg);
		SHOW("caught signal %d past EOF", sig);
	}
	/* The mask was restored by siglongjmp. */
	sigset_t cur;
	sigprocmask(SIG_BLOCK, NULL, &cur);
	EXPECT_TRUE(!sigismember(&cur, SIGSEGV) && !sigismember(&cur, SIGBUS));

	SHOW("executing ud2");
	fflush(stdout);
	__builtin_trap();
}
