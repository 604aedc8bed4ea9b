/* futex_waitv(2): the index of the futex a FUTEX_WAKE wakes (private and
 * shared futexes, from another thread), EAGAIN when a value differs,
 * ETIMEDOUT at an absolute timeout on either clock, NUMA futexes' node
 * word, and the EINVAL and EFAULT checks in Linux's order. Only the main
 * thread prints. */
#include "t.h"
#include <linux/futex.h>
#include <pthread.h>
#include <time.h>

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#define U32 2
#define NUMA 4
#define MPOL 8
#define PRIV 128

struct waitv { uint64_t val, uaddr; uint32_t flags, reserved; };

static uint32_t f[8] __attribute__((aligned(16)));
static struct waitv v[128];
static volatile long got;
static int got_errno;

static long waitv(int n, struct timespec *ts, int clock)
{
	return syscall(SYS_futex_waitv, v, n, 0, ts, clock);
}

static void setv(int i, uint32_t *addr, uint64_t val, uint32_t flags)
{
	v[i] = (struct waitv){val, (uint64_t)(uintptr_t)addr, flags, 0};
}

/* An absolute timeout `ms` from now on `clock`. */
static struct timespec *in_ms(int clock, long ms)
{
	static struct timespec ts;
	clock_gettime(clock, &ts);
	ts.tv_nsec += ms * 1000000;
	ts.tv_sec += ts.tv_nsec / 1000000000;
	ts.tv_nsec %= 1000000000;
	return &ts;
}

static void *waiter(void *arg)
{
	(void)arg;
	errno = 0;
	got = waitv(3, NULL, 0);
	got_errno = errno;
	return NULL;
}

/* Waits in a thread on f[0], f[2], f[4]; wakes `which` until one waiter
 * is woken; returns what the thread's call returned. */
static long wake_one(uint32_t *which, int op)
{
	pthread_t t;
	got = -2;
	pthread_create(&t, NULL, waiter, NULL);
	/* (a thread that returned without waiting ends the loop too) */
	while (got == -2 && syscall(SYS_futex, which, op, 1, NULL, NULL, 0) != 1)
		usleep(1000);
	pthread_join(t, NULL);
	return got;
}

int main(void)
{
	struct timespec past = {0, 0};
	setv(0, &f[0], 0, U32 | PRIV);
	setv(1, &f[2], 0, U32 | PRIV);
	setv(2, &f[4], 0, U32);
	EXPECT_ERR(waitv(3, &past, CLOCK_MONOTONIC), ETIMEDOUT);
	EXPECT_ERR(waitv(3, &past, CLOCK_REALTIME), ETIMEDOUT);
	EXPECT_ERR(waitv(3, in_ms(CLOCK_MONOTONIC, 30), CLOCK_MONOTONIC), ETIMEDOUT);
	EXPECT_ERR(waitv(3, in_ms(CLOCK_REALTIME, 30), CLOCK_REALTIME), ETIMEDOUT);

	/* Woken: the index of the futex woken. */
	EXPECT(wake_one(&f[2], FUTEX_WAKE_PRIVATE), 1);
	EXPECT(wake_one(&f[0], FUTEX_WAKE_PRIVATE), 0);
	EXPECT(wake_one(&f[4], FUTEX_WAKE), 2);

	/* A value that differs, at any index. */
	v[2].val = 1;
	EXPECT_ERR(waitv(3, NULL, 0), EAGAIN);
	v[2].val = 0;
	f[0] = 5;
	EXPECT_ERR(waitv(3, NULL, 0), EAGAIN);
	f[0] = 0;
	/* 128 futexes, the last one differing; 129 are too many. */
	for (int i = 3; i < 128; i++)
		setv(i, &f[6], 0, U32 | PRIV);
	v[127].val = 1;
	EXPECT_ERR(waitv(128, NULL, 0), EAGAIN);
	EXPECT_ERR(waitv(129, NULL, 0), EINVAL);
	v[127].val = 0;
	EXPECT_ERR(waitv(128, &past, CLOCK_MONOTONIC), ETIMEDOUT);

	/* The call's own arguments. */
	EXPECT_ERR(syscall(SYS_futex_waitv, v, 3, 1, &past, CLOCK_MONOTONIC), EINVAL);
	EXPECT_ERR(waitv(0, &past, CLOCK_MONOTONIC), EINVAL);
	EXPECT_ERR(syscall(SYS_futex_waitv, NULL, 3, 0, &past, CLOCK_MONOTONIC), EINVAL);
	EXPECT_ERR(syscall(SYS_futex_waitv, BADPTR, 3, 0, &past, CLOCK_MONOTONIC), EFAULT);
	EXPECT_ERR(waitv(3, &past, CLOCK_BOOTTIME), EINVAL);
	EXPECT_ERR(waitv(3, BADPTR, CLOCK_MONOTONIC), EFAULT);
	EXPECT_ERR(waitv(3, BADPTR, CLOCK_BOOTTIME), EINVAL);
	struct timespec bad = {0, 1000000000}, neg = {-1, 0};
	EXPECT_ERR(waitv(3, &bad, CLOCK_MONOTONIC), EINVAL);
	EXPECT_ERR(waitv(3, &neg, CLOCK_MONOTONIC), EINVAL);

	/* Each futex's flags, value and address. */
	uint32_t flags[] = {0, 1, 3, 0x10, 0x40, 0x102};
	for (unsigned i = 0; i < sizeof flags / sizeof *flags; i++) {
		v[0].flags = flags[i];
		EXPECT_ERR(waitv(3, &past, CLOCK_MONOTONIC), EINVAL);
	}
	v[0].flags = U32 | MPOL;
	EXPECT_ERR(waitv(3, &past, CLOCK_MONOTONIC), ETIMEDOUT);
	v[0].flags = U32 | PRIV;
	v[0].reserved = 1;
	EXPECT_ERR(waitv(3, &past, CLOCK_MONOTONIC), EINVAL);
	v[0].reserved = 0;
	v[0].val = 1ULL << 32;
	EXPECT_ERR(waitv(3, &past, CLOCK_MONOTONIC), EINVAL);
	v[0].val = 0;
	setv(1, (uint32_t *)((char *)&f[2] + 2), 0, U32 | PRIV);
	EXPECT_ERR(waitv(3, &past, CLOCK_MONOTONIC), EINVAL);
	/* A bad address, then a differing value: the first in order wins;
	 * misalignment is found before either. */
	setv(1, BADPTR - 1, 0, U32 | PRIV);
	v[2].val = 1;
	EXPECT_ERR(waitv(3, &past, CLOCK_MONOTONIC), EFAULT);
	v[0].val = 1;
	EXPECT_ERR(waitv(3, &past, CLOCK_MONOTONIC), EAGAIN);
	setv(1, (uint32_t *)((char *)&f[2] + 1), 0, U32 | PRIV);
	EXPECT_ERR(waitv(3, &past, CLOCK_MONOTONIC), EINVAL);
	v[0].val = 0;
	v[2].val = 0;
	setv(1, &f[2], 0, U32 | PRIV);

	/* NUMA futexes: a value and a node word, 8-byte aligned; no node
	 * (-1) is replaced by the caller's, node 0. */
	f[1] = 0;
	v[0].flags = U32 | PRIV | NUMA;
	EXPECT_ERR(waitv(3, &past, CLOCK_MONOTONIC), ETIMEDOUT);
	f[1] = -1;
	EXPECT_ERR(waitv(3, &past, CLOCK_MONOTONIC), ETIMEDOUT);
	SHOW("node word after: %d", (int)f[1]);
	f[1] = -1;
	v[0].flags = U32 | PRIV | NUMA | MPOL;
	EXPECT_ERR(waitv(3, &past, CLOCK_MONOTONIC), ETIMEDOUT);
	SHOW("node word after, MPOL: %d", (int)f[1]);
	f[1] = 5;
	EXPECT_ERR(waitv(3, &past, CLOCK_MONOTONIC), EINVAL);
	f[1] = 0;
	setv(0, &f[1], 0, U32 | PRIV | NUMA);
	EXPECT_ERR(waitv(3, &past, CLOCK_MONOTONIC), EINVAL);
	return t_done();
}
