/* Vector registers (YMM, and ZMM (upper halves) and a mask register where the CPU has
 * AVX-512) keep their values across a signal whose handler clobbers them,
 * across system calls and yields, and while another thread does the same. */
#include "t.h"
#include <cpuid.h>
#include <pthread.h>

static int avx512;

static int has_avx512(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & (1u << 16)))
		return 0;
	unsigned lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (lo & 0xe6) == 0xe6;
}

static void set_all(unsigned long long v)
{
	unsigned long long buf[8] = {v, v + 1, v + 2, v + 3, v + 4, v + 5, v + 6, v + 7};
	__asm__ volatile("vmovdqu %0, %%ymm3\n\tvmovdqu %0, %%ymm12" ::"m"(buf) : "xmm3", "xmm12");
	if (avx512)
		__asm__ volatile("vmovdqu64 %0, %%zmm7\n\tvmovdqu64 %0, %%zmm13\n\tkmovq %1, %%k3"
				 ::"m"(buf), "r"(v) : "xmm7", "xmm13");
}

static int check_all(unsigned long long v)
{
	unsigned long long a[4], b[4], z[8], y[8], k = v;
	__asm__ volatile("vmovdqu %%ymm3, %0\n\tvmovdqu %%ymm12, %1" : "=m"(a), "=m"(b));
	int ok = 1;
	for (int i = 0; i < 4; i++)
		ok &= a[i] == v + i && b[i] == v + i;
	if (avx512) {
		__asm__ volatile("vmovdqu64 %%zmm7, %0\n\tvmovdqu64 %%zmm13, %1\n\tkmovq %%k3, %2"
				 : "=m"(z), "=m"(y), "=r"(k));
		for (int i = 0; i < 8; i++)
			ok &= z[i] == v + i && y[i] == v + i;
		ok &= k == v;
	}
	return ok;
}

static void on_usr1(int s)
{
	(void)s;
	set_all(0xdead0000);
}

static void *worker(void *arg)
{
	unsigned long long v = (unsigned long long)(long)arg;
	int ok = 1;
	for (int i = 0; i < 200; i++) {
		set_all(v + i);
		sched_yield();
		syscall(SYS_getppid);
		ok &= check_all(v + i);
	}
	return (void *)(long)ok;
}

int main(void)
{
	avx512 = has_avx512();
	signal(SIGUSR1, on_usr1);
	set_all(0x1000);
	raise(SIGUSR1);
	EXPECT_TRUE(check_all(0x1000));
	pthread_t t[3];
	for (long i = 0; i < 3; i++)
		EXPECT(pthread_create(&t[i], NULL, worker, (void *)(0x100000 * (i + 1))), 0);
	int ok = 1;
	for (int i = 0; i < 3; i++) {
		void *r;
		pthread_join(t[i], &r);
		ok &= (long)r == 1;
	}
	EXPECT_TRUE(ok);
	return t_done();
}
