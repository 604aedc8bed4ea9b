/* futex_wake, futex_wait, futex_requeue (Linux 6.7): a waiter woken by a
 * wake whose mask meets its own, not by one that does not; a requeue that
 * wakes one waiter and moves another; absolute timeouts on the chosen
 * clock; and the flag, size, mask and value errors. */
#include "t.h"

#include <linux/futex.h>
#include <pthread.h>

#ifndef SYS_futex_wake
#define SYS_futex_wake 454
#define SYS_futex_wait 455
#define SYS_futex_requeue 456
#endif
#define F2_U32 2
#define F2_PRIVATE 128

static unsigned int a_word, b_word;
static volatile int ready;

static long fwake(void *u, unsigned long mask, int nr, unsigned flags)
{
	return syscall(SYS_futex_wake, u, mask, nr, flags);
}

static long fwait(void *u, unsigned long val, unsigned long mask, unsigned flags,
		  struct timespec *ts, int clock)
{
	return syscall(SYS_futex_wait, u, val, mask, flags, ts, clock);
}

static void *waiter(void *arg)
{
	unsigned long mask = (unsigned long)arg;
	__atomic_add_fetch(&ready, 1, __ATOMIC_SEQ_CST);
	long r = fwait(&a_word, 0, mask, F2_U32 | F2_PRIVATE, NULL, 0);
	return (void *)r;
}

static void settle(int n)
{
	while (__atomic_load_n(&ready, __ATOMIC_SEQ_CST) < n)
		sched_yield();
	usleep(100000);
}

int main(void)
{
	unsigned int w = 7;
	EXPECT_ERR(fwake(&w, 1, 1, 0), EINVAL);		/* U8 */
	EXPECT_ERR(fwake(&w, 1, 1, F2_U32 | 0x1000), EINVAL);
	EXPECT_ERR(fwake(&w, 0, 1, F2_U32), EINVAL);
	EXPECT_ERR(fwake(&w, 1UL << 40, 1, F2_U32), EINVAL);
	EXPECT_ERR(fwake((char *)&w + 1, 1, 1, F2_U32), EINVAL);
	EXPECT(fwake(&w, 1, 1, F2_U32), 0);
	EXPECT(fwake(&w, 1, 0, F2_U32), 0);
	EXPECT_ERR(fwait(&w, 6, ~0U, F2_U32, NULL, 0), EAGAIN);
	EXPECT_ERR(fwait(&w, 1UL << 40, ~0U, F2_U32, NULL, 0), EINVAL);
	struct timespec past = { 0, 0 };
	EXPECT_ERR(fwait(&w, 7, ~0U, F2_U32, &past, CLOCK_MONOTONIC), ETIMEDOUT);
	EXPECT_ERR(fwait(&w, 7, ~0U, F2_U32, &past, CLOCK_REALTIME), ETIMEDOUT);
	EXPECT_ERR(fwait(&w, 7, ~0U, F2_U32, &past, CLOCK_BOOTTIME), EINVAL);
	struct timespec soon;
	clock_gettime(CLOCK_MONOTONIC, &soon);
	soon.tv_nsec += 20000000;
	if (soon.tv_nsec >= 1000000000) {
		soon.tv_sec++;
		soon.tv_nsec -= 1000000000;
	}
	EXPECT_ERR(fwait(&w, 7, ~0U, F2_U32, &soon, CLOCK_MONOTONIC), ETIMEDOUT);

	/* Masks: a wake for bit 2 passes a waiter on bit 1 by. */
	pthread_t t1;
	pthread_create(&t1, NULL, waiter, (void *)1UL);
	settle(1);
	EXPECT(fwake(&a_word, 2, 1, F2_U32 | F2_PRIVATE), 0);
	EXPECT(fwake(&a_word, 1, 1, F2_U32 | F2_PRIVATE), 1);
	void *r;
	pthread_join(t1, &r);
	EXPECT((long)r, 0);

	/* Requeue: one woken, one moved to b_word, then woken there. */
	pthread_t t2, t3;
	pthread_create(&t2, NULL, waiter, (void *)0xffffffffUL);
	pthread_create(&t3, NULL, waiter, (void *)0xffffffffUL);
	settle(3);
	struct futex_waitv v[2] = {
		{ .val = 1, .uaddr = (unsigned long)&a_word, .flags = F2_U32 | F2_PRIVATE },
		{ .uaddr = (unsigned long)&b_word, .flags = F2_U32 | F2_PRIVATE },
	};
	EXPECT_ERR(syscall(SYS_futex_requeue, v, 0, 1, 1), EAGAIN);
	EXPECT_ERR(syscall(SYS_futex_requeue, v, 1, 1, 1), EINVAL);
	v[0].val = 0;
	EXPECT(syscall(SYS_futex_requeue, v, 0, 1, 1), 2);
	usleep(50000);
	EXPECT(fwake(&a_word, ~0U, 10, F2_U32 | F2_PRIVATE), 0);
	EXPECT(fwake(&b_word, ~0U, 10, F2_U32 | F2_PRIVATE), 1);
	pthread_join(t2, NULL);
	pthread_join(t3, NULL);
	return t_done();
}
