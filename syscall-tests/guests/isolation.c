/* An unprivileged process attacks a root one through the seccomp
 * platform's stub trampoline (a `syscall` at 0x7fffffe00000 that the stub
 * threads use to map the memory file): it tries to map the memory file
 * (every process's pages), to make a root-owned read-only file's pages
 * writable, and to make the time page, the vDSO and the patched-site table
 * writable and scribble on them. Natively nothing is mapped there
 * (SIGSEGV); in the sandbox, on every platform, a jump there must be an
 * ordinary guest call. What the root process sees afterwards must be what
 * Linux shows. */
#include "t.h"
#include <setjmp.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#define TRAMPOLINE 0x7fffffe00000UL
#define FAST_TABLE 0x60000UL
#define MEMFD 3
#define NO_TRAMPOLINE (-100000L)

static sigjmp_buf jump;
static volatile long trap_rax;
static volatile int trapped;

static void on_signal(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	(void)si;
	/* SIGTRAP: the trampoline's `int3` after its `syscall`. */
	trapped = sig == SIGTRAP;
	trap_rax = uc->uc_mcontext.gregs[REG_RAX];
	siglongjmp(jump, 1);
}

/* Calls `nr` through the trampoline; NO_TRAMPOLINE if nothing is there. */
static long tramp(long nr, long a, long b, long c, long d, long e, long f)
{
	if (sigsetjmp(jump, 1))
		return trapped ? trap_rax : NO_TRAMPOLINE;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile("call *%[t]"
			 : "=a"(ret)
			 : [t] "r"(TRAMPOLINE), "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8),
			   "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

/* The attacker, as nobody: reports through `out` each thing it managed
 * (a letter per attack) before it tries to use it. */
static void attack(int go, int out, const char *ro_path)
{
	struct sigaction sa = {.sa_sigaction = on_signal, .sa_flags = SA_SIGINFO | SA_NODEFER};
	sigaction(SIGTRAP, &sa, NULL);
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	if (setgid(65534) || setuid(65534))
		_exit(3);
	char c;
	if (read(go, &c, 1) != 1)
		_exit(3);
#define REPORT(letter) ((void)!write(out, letter, 1))

	/* 1: the memory file, where every process's pages are: a page of it
	 * anywhere in the first GiB is enough to read them all. */
	char *win = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (long off = 0; off < (1L << 30); off += 64 << 20) {
		if (tramp(SYS_mmap, (long)win, 4096, PROT_READ, MAP_SHARED | MAP_FIXED, MEMFD, off) ==
		    (long)win) {
			REPORT("m");
			break;
		}
	}
	/* 2: a root-owned 0644 file's pages, made writable. */
	int fd = open(ro_path, O_RDONLY);
	char *ro = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (ro != MAP_FAILED &&
	    tramp(SYS_mprotect, (long)ro, 4096, PROT_READ | PROT_WRITE, 0, 0, 0) == 0) {
		REPORT("w");
		if (!sigsetjmp(jump, 1))
			memcpy(ro, "tampered", 8);
	}
	/* 3: the table every process's patched call sites jump through. */
	if (tramp(SYS_mprotect, FAST_TABLE, 0x10000, PROT_READ | PROT_WRITE, 0, 0, 0) == 0) {
		REPORT("f");
		if (!sigsetjmp(jump, 1))
			memset((void *)FAST_TABLE, 0, 0x10000);
	}
	/* 4, last (it may break this process): the time page(s) below the
	 * vDSO, which every process reads its clock from. Whether that
	 * worked shows in the root process's clock. */
	unsigned long vdso = getauxval(AT_SYSINFO_EHDR);
	for (int k = 1; vdso && k <= 4; k++) {
		char *p = (char *)(vdso - k * 4096L);
		if (tramp(SYS_mprotect, (long)p, 4096, PROT_READ | PROT_WRITE, 0, 0, 0) == 0 &&
		    !sigsetjmp(jump, 1))
			memset(p, 0x55, 4096);
	}
	_exit(0);
}

int main(void)
{
	char ro_path[] = "/tmp/isolation-XXXXXX";
	int fd = mkstemp(ro_path);
	EXPECT_TRUE(fd >= 0 && write(fd, "original", 8) == 8);
	fchmod(fd, 0644);
	close(fd);

	int go[2], out[2];
	EXPECT(pipe(go), 0);
	EXPECT(pipe(out), 0);
	/* The pipes must not be descriptor 3, the stub's memory file. */
	EXPECT_TRUE(dup2(go[0], 10) == 10 && dup2(go[1], 11) == 11 && dup2(out[0], 12) == 12 &&
		    dup2(out[1], 13) == 13);
	close(go[0]), close(go[1]), close(out[0]), close(out[1]);
	fflush(stdout);
	pid_t child = fork();
	if (child == 0) {
		close(11), close(12);
		attack(10, 13, ro_path);
	}
	close(10), close(13);
	pid_t ppid = getppid();
	EXPECT(write(11, "g", 1), 1);
	char got[64] = {0};
	for (size_t n = 0; n < sizeof(got) - 1 && read(12, got + n, 1) == 1; n++)
		;
	int st;
	EXPECT_TRUE(waitpid(child, &st, 0) == child);
	EXPECT_TRUE(!strchr(got, 'm')); /* mapped the memory file */
	EXPECT_TRUE(!strchr(got, 'w')); /* made a read-only file writable */
	EXPECT_TRUE(!strchr(got, 'f')); /* made the patched-site table writable */

	char buf[9] = {0};
	fd = open(ro_path, O_RDONLY);
	EXPECT(read(fd, buf, 8), 8);
	SHOW("read-only file holds: %s", buf);
	close(fd);
	unlink(ro_path);

	struct timespec vdso_now, sys_now;
	clock_gettime(CLOCK_REALTIME, &vdso_now);
	syscall(SYS_clock_gettime, CLOCK_REALTIME, &sys_now);
	EXPECT_TRUE(llabs((long long)(vdso_now.tv_sec - sys_now.tv_sec)) < 5);
	int same = 1;
	for (int i = 0; i < 1000; i++)
		same &= getppid() == ppid;
	EXPECT_TRUE(same);
	/* A process that starts afterwards runs its patched sites normally. */
	pid_t me = getpid(), again = fork();
	if (again == 0)
		_exit(getppid() == me ? 0 : 9);
	EXPECT_TRUE(waitpid(again, &st, 0) == again);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return t_done();
}
