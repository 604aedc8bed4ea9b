/* What a user program gets for what only a kernel may do: privileged
 * instructions, port I/O, the kernel half of the address space (where the
 * KVM platform keeps its tables and entry stubs), jumps there, and system
 * calls with nonsense in every register; sysenter on AMD. Each case runs in
 * a child whose handler prints the signal, its si_code and what si_addr is. */
#include "t.h"
#include <cpuid.h>

static volatile uintptr_t expect_addr;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	uintptr_t a = (uintptr_t)si->si_addr;
	const char *what = a == 0 ? "0" : a == expect_addr ? "expected" : "other";
	char line[128];
	int n = snprintf(line, sizeof line, "  signal %d code %d addr %s\n", sig, si->si_code, what);
	write(1, line, n);
	_exit(0);
}

/* The platform's region on KVM: its IDT, page tables, stubs. */
#define KBASE 0xffffff8000000000ul

static void run(const char *name, void (*f)(void), uintptr_t addr)
{
	printf("%s:\n", name);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = on_signal;
		sa.sa_flags = SA_SIGINFO;
		int sigs[] = {SIGSEGV, SIGILL, SIGTRAP, SIGBUS, SIGFPE};
		for (unsigned i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
			sigaction(sigs[i], &sa, NULL);
		expect_addr = addr;
		f();
		printf("  no signal\n");
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

extern char ud2_at[], sysenter_at[];

/* AMD CPUs raise #UD for sysenter in 64-bit mode; Intel's enter Linux's
 * 32-bit entry, whose return lands on a landing pad a 64-bit process has
 * not mapped, so only AMD's answer is one to compare. */
static int amd(void)
{
	unsigned a, b, c, d;
	__get_cpuid(0, &a, &b, &c, &d);
	return b == 0x68747541; /* "Auth" of AuthenticAMD */
}
static void do_hlt(void) { __asm__ volatile("hlt"); }
static void do_in(void) { __asm__ volatile("inb $0x80, %%al" ::: "rax"); }
static void do_out(void) { __asm__ volatile("outb %%al, $0x80" ::: "memory"); }
static void do_cli(void) { __asm__ volatile("cli"); }
static void do_lgdt(void)
{
	struct __attribute__((packed)) { unsigned short limit; unsigned long base; } d = {0xffff, 0};
	__asm__ volatile("lgdt %0" ::"m"(d));
}
static void do_cr3(void) { unsigned long v; __asm__ volatile("mov %%cr3, %0" : "=r"(v)); }
static void do_wrmsr(void) { __asm__ volatile("wrmsr" ::"c"(0x10), "a"(0), "d"(0)); }
static void do_int40(void) { __asm__ volatile("int $0x40"); }
static void do_sysenter(void)
{
	__asm__ volatile(".globl sysenter_at\nsysenter_at: sysenter" ::: "rcx", "r11", "memory");
}
static void do_ud2(void) { __asm__ volatile(".globl ud2_at\nud2_at: ud2"); }
static void do_read_kernel(void) { (void)*(volatile char *)KBASE; }
static void do_write_tables(void) { *(volatile unsigned long *)(KBASE + 0x2000) = 0; }
static void do_jump_stub(void) { ((void (*)(void))(KBASE + 0x1800))(); }
static void do_noncanonical(void) { (void)*(volatile char *)0x8000000000000000ul; }

static long raw_syscall(unsigned long nr)
{
	long r;
	register long r10 __asm__("r10") = -1;
	register long r8 __asm__("r8") = 0x5555555555555555;
	register long r9 __asm__("r9") = -2;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(nr), "D"(-1L), "S"(0x7fffffffffffL), "d"(-3L), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return r;
}

int main(void)
{
	run("hlt", do_hlt, 0);
	run("in", do_in, 0);
	run("out", do_out, 0);
	run("cli", do_cli, 0);
	run("lgdt", do_lgdt, 0);
	run("mov from cr3", do_cr3, 0);
	run("wrmsr", do_wrmsr, 0);
	run("int $0x40", do_int40, 0);
	if (amd())
		run("sysenter", do_sysenter, (uintptr_t)sysenter_at);
	run("ud2", do_ud2, (uintptr_t)ud2_at);
	run("read of the kernel half", do_read_kernel, KBASE);
	run("write there", do_write_tables, KBASE + 0x2000);
	run("jump there", do_jump_stub, KBASE + 0x1800);
	run("non-canonical read", do_noncanonical, 0);
	EXPECT(raw_syscall(0x7fffffff), -ENOSYS);
	EXPECT(raw_syscall(-1ul), -ENOSYS);
	EXPECT(raw_syscall(0x40000000 | 39), -ENOSYS); /* x32 getpid */
	EXPECT_TRUE(syscall(SYS_getppid) >= 0);
	return t_done();
}
