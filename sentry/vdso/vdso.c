/*
 * ferrovisor's vDSO: the functions glibc and musl look up through
 * AT_SYSINFO_EHDR instead of trapping into the kernel.
 *
 * clock_gettime, gettimeofday and time compute the time from the CPU's
 * timestamp counter and the time page the Sentry keeps current (vvar.h),
 * mapped read-only one page below this image. getcpu answers cpu 0, node 0,
 * as the Sentry's getcpu(2) does. Anything the page cannot answer (CPU-time
 * clocks, unknown clock ids, a page marked invalid or gone stale) issues the
 * real system call, which the Sentry traps like any other; so does
 * clock_getres.
 *
 * Rules for this file, because the image is mapped into guests as is, with no
 * loader to fix it up: no global data, no calls to anything outside this file,
 * nothing that needs a relocation (build.rs rejects an image that has one).
 * The time page is reached PC-relative through a hidden linker-script symbol,
 * which needs none. The types are spelled out here rather than taken from
 * libc headers, since the object is built -ffreestanding -nostdlib.
 */

#include "vvar.h"

/* x86-64 syscall numbers (arch/x86/entry/syscalls/syscall_64.tbl). */
#define NR_gettimeofday 96
#define NR_time 201
#define NR_clock_gettime 228
#define NR_clock_getres 229

#define CLOCK_REALTIME 0
#define NSEC_PER_SEC 1000000000UL

/*
 * How many times a reader retries while the Sentry is mid-update before it
 * gives up and asks the Sentry. An update takes well under a microsecond,
 * but the Sentry's thread can be preempted in the middle of one.
 */
#define SEQ_RETRIES 1000

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

/* Defined by vdso.lds one page below the image's first byte. */
extern const struct vvar_page vvar_page __attribute__((visibility("hidden")));

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

/*
 * The TSC read between two LFENCEs: the first keeps it from running before
 * the loads of the seqlock's first sequence read, the second keeps the final
 * sequence check from running before it (Intel SDM vol. 2, RDTSC). With both,
 * a reader that used the old parameters read the TSC before the Sentry
 * sampled the new base, which is what makes updates monotonic.
 */
static inline unsigned long rdtsc_ordered(void)
{
	unsigned int lo, hi;
	__asm__ volatile("lfence; rdtsc; lfence" : "=a"(lo), "=d"(hi) : : "memory");
	return ((unsigned long)hi << 32) | lo;
}

static inline unsigned long load(const unsigned long *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/*
 * Nanoseconds since `clock`'s epoch, from the time page; 0 when the page
 * cannot answer (the caller then traps). No real clock reads 0.
 */
static inline unsigned long vvar_ns(unsigned int clock)
{
	const struct vvar_page *vv = &vvar_page;
	int tries;

	if (clock >= VVAR_CLOCKS)
		return 0;
	for (tries = 0; tries < SEQ_RETRIES; tries++) {
		unsigned long seq = __atomic_load_n(&vv->seq, __ATOMIC_ACQUIRE);
		unsigned long valid, base, mult, tsc_base, max_delta, shift, tsc;
		long delta;

		if (seq & 1) {
			__asm__ volatile("pause");
			continue;
		}
		valid = load(&vv->valid);
		base = load(&vv->clock[clock].base_ns);
		mult = load(&vv->clock[clock].mult);
		tsc_base = load(&vv->tsc_base);
		max_delta = load(&vv->max_delta);
		shift = load(&vv->shift);
		tsc = rdtsc_ordered();
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&vv->seq, __ATOMIC_RELAXED) != seq)
			continue;

		if (!valid || mult == 0 || shift > 63)
			return 0;
		/*
		 * A TSC a little behind the base (read on a core whose counter
		 * trails the Sentry's by a few cycles) counts as the base, so
		 * the clock stands still rather than go back.
		 */
		delta = (long)(tsc - tsc_base);
		if (delta < 0)
			delta = 0;
		if ((unsigned long)delta > max_delta)
			return 0;
		return base + (unsigned long)(((unsigned __int128)(unsigned long)delta * mult) >> shift);
	}
	return 0;
}

/*
 * Like Linux's vDSO these return the raw kernel result (-errno on failure);
 * the C library turns that into errno itself.
 */

int __vdso_clock_gettime(int clock, struct vdso_timespec *ts)
{
	unsigned long ns = vvar_ns((unsigned int)clock);

	if (ns == 0)
		return (int)vdso_syscall2(NR_clock_gettime, clock, (long)ts);
	ts->tv_sec = (long)(ns / NSEC_PER_SEC);
	ts->tv_nsec = (long)(ns % NSEC_PER_SEC);
	return 0;
}

int __vdso_gettimeofday(struct vdso_timeval *tv, struct vdso_timezone *tz)
{
	unsigned long ns;

	if (tv == 0)
		return (int)vdso_syscall2(NR_gettimeofday, (long)tv, (long)tz);
	ns = vvar_ns(CLOCK_REALTIME);
	if (ns == 0)
		return (int)vdso_syscall2(NR_gettimeofday, (long)tv, (long)tz);
	tv->tv_sec = (long)(ns / NSEC_PER_SEC);
	tv->tv_usec = (long)(ns % NSEC_PER_SEC / 1000);
	/* The Sentry's timezone is always UTC with no DST correction. */
	if (tz != 0) {
		tz->tz_minuteswest = 0;
		tz->tz_dsttime = 0;
	}
	return 0;
}

long __vdso_time(long *t)
{
	unsigned long ns = vvar_ns(CLOCK_REALTIME);
	long sec;

	if (ns == 0)
		return vdso_syscall1(NR_time, (long)t);
	sec = (long)(ns / NSEC_PER_SEC);
	if (t != 0)
		*t = sec;
	return sec;
}

/*
 * The Sentry presents every task as running on CPU 0 of node 0 (its getcpu(2)
 * says so too), so there is nothing to ask. The third argument is the unused
 * `struct getcpu_cache *` of getcpu(2).
 */
long __vdso_getcpu(unsigned *cpu, unsigned *node, void *unused)
{
	(void)unused;
	if (cpu != 0)
		*cpu = 0;
	if (node != 0)
		*node = 0;
	return 0;
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
