/*
 * ferrovisor's vDSO: the functions glibc and musl look up through
 * AT_SYSINFO_EHDR instead of trapping into the kernel.
 *
 * For now every entry point issues the real system call with the same number
 * and arguments. The Sentry traps it like any other guest syscall, so the
 * answers are exactly those of the syscall table; a later step will read a
 * time page published by the Sentry and skip the trap for the clocks.
 *
 * Rules for this file, because the image is mapped into guests as is, with no
 * loader to fix it up: no global data, no calls to anything outside this file,
 * nothing that needs a relocation (build.rs rejects an image that has one).
 * The types are spelled out here rather than taken from libc headers, since
 * the object is built -ffreestanding -nostdlib.
 */

/* x86-64 syscall numbers (arch/x86/entry/syscalls/syscall_64.tbl). */
#define NR_gettimeofday 96
#define NR_time 201
#define NR_clock_gettime 228
#define NR_clock_getres 229
#define NR_getcpu 309

struct vdso_timespec {
	long tv_sec;
	long tv_nsec;
};

struct vdso_timeval {
	long tv_sec;
	long tv_usec;
};

struct vdso_timezone {
	int tz_minuteswest;
	int tz_dsttime;
};

/*
 * The syscall instruction takes its number in rax and arguments in rdi, rsi,
 * rdx; it clobbers rcx (return address) and r11 (flags). "memory" because the
 * kernel writes through the pointer arguments.
 */
static inline long vdso_syscall1(long nr, long a0)
{
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"(nr), "D"(a0)
			 : "rcx", "r11", "memory");
	return ret;
}

static inline long vdso_syscall2(long nr, long a0, long a1)
{
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"(nr), "D"(a0), "S"(a1)
			 : "rcx", "r11", "memory");
	return ret;
}

static inline long vdso_syscall3(long nr, long a0, long a1, long a2)
{
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"(nr), "D"(a0), "S"(a1), "d"(a2)
			 : "rcx", "r11", "memory");
	return ret;
}

/*
 * Like Linux's vDSO these return the raw kernel result (-errno on failure);
 * the C library turns that into errno itself.
 */

int __vdso_clock_gettime(int clock, struct vdso_timespec *ts)
{
	return (int)vdso_syscall2(NR_clock_gettime, clock, (long)ts);
}

int __vdso_gettimeofday(struct vdso_timeval *tv, struct vdso_timezone *tz)
{
	return (int)vdso_syscall2(NR_gettimeofday, (long)tv, (long)tz);
}

long __vdso_time(long *t)
{
	return vdso_syscall1(NR_time, (long)t);
}

/* The third argument is the unused `struct getcpu_cache *` of getcpu(2). */
long __vdso_getcpu(unsigned *cpu, unsigned *node, void *unused)
{
	return vdso_syscall3(NR_getcpu, (long)cpu, (long)node, (long)unused);
}

int __vdso_clock_getres(int clock, struct vdso_timespec *res)
{
	return (int)vdso_syscall2(NR_clock_getres, clock, (long)res);
}

/* Linux's vDSO also exports each function under its plain name, weakly. */
int clock_gettime(int, struct vdso_timespec *)
	__attribute__((weak, alias("__vdso_clock_gettime")));
int gettimeofday(struct vdso_timeval *, struct vdso_timezone *)
	__attribute__((weak, alias("__vdso_gettimeofday")));
long time(long *) __attribute__((weak, alias("__vdso_time")));
long getcpu(unsigned *, unsigned *, void *)
	__attribute__((weak, alias("__vdso_getcpu")));
int clock_getres(int, struct vdso_timespec *)
	__attribute__((weak, alias("__vdso_clock_getres")));
