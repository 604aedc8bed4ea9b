/* Raw futex between two threads: WAIT blocks until WAKE, EAGAIN on a stale
 * value, ETIMEDOUT on a relative timeout, WAKE's count, private and shared,
 * WAIT_BITSET/WAKE_BITSET, REQUEUE, and a shared futex across fork. */
#include "t.h"
#include <linux/futex.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>

static long futex(int *uaddr, int op, int val, const struct timespec *ts, int *uaddr2, int val3)
{
	return syscall(SYS_futex, uaddr, op, val, ts, uaddr2, val3);
}

static int word, word2, woken;
static volatile int waiting;

static void *waiter(void *arg)
{
	int op = (int)(long)arg;
	__atomic_add_fetch(&waiting, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&word, __ATOMIC_SEQ_CST) == 0)
		futex(&word, op, 0, NULL, NULL, 1);
	__atomic_add_fetch(&woken, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void wait_for_waiters(int n)
{
	while (__atomic_load_n(&waiting, __ATOMIC_SEQ_CST) < n)
		usleep(1000);
	usleep(50000); /* let them reach FUTEX_WAIT */
}

int main(void)
{
	struct timespec ts = {0, 100000000};
	/* Value mismatch: EAGAIN at once. */
	word = 1;
	EXPECT_ERR(futex(&word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0), EAGAIN);
	/* Timeout. */
	word = 0;
	EXPECT_ERR(futex(&word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0), ETIMEDOUT);
	EXPECT_ERR(futex(&word, FUTEX_WAIT, 0, &ts, NULL, 0), ETIMEDOUT);
	/* Nobody waiting: wake returns 0. */
	EXPECT(futex(&word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0), 0);

	/* One waiter, private. */
	pthread_t t[3];
	EXPECT_RC(pthread_create(&t[0], NULL, waiter, (void *)(long)FUTEX_WAIT_PRIVATE), 0);
	wait_for_waiters(1);
	EXPECT(__atomic_load_n(&woken, __ATOMIC_SEQ_CST), 0);
	__atomic_store_n(&word, 1, __ATOMIC_SEQ_CST);
	EXPECT(futex(&word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0), 1);
	EXPECT_RC(pthread_join(t[0], NULL), 0);
	EXPECT(woken, 1);

	/* Three waiters, wake them two then one. */
	word = 0;
	woken = 0;
	waiting = 0;
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, waiter, (void *)(long)FUTEX_WAIT);
	wait_for_waiters(3);
	__atomic_store_n(&word, 1, __ATOMIC_SEQ_CST);
	EXPECT(futex(&word, FUTEX_WAKE, 2, NULL, NULL, 0), 2);
	usleep(50000);
	EXPECT(__atomic_load_n(&woken, __ATOMIC_SEQ_CST), 2);
	EXPECT(futex(&word, FUTEX_WAKE, 10, NULL, NULL, 0), 1);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	EXPECT(woken, 3);

	/* Bitsets: a wake with a disjoint mask wakes nobody. */
	word = 0;
	woken = 0;
	waiting = 0;
	pthread_create(&t[0], NULL, waiter, (void *)(long)(FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG));
	wait_for_waiters(1);
	EXPECT(futex(&word, FUTEX_WAKE_BITSET | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 2), 0);
	EXPECT_ERR(futex(&word, FUTEX_WAKE_BITSET | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0), EINVAL);
	__atomic_store_n(&word, 1, __ATOMIC_SEQ_CST);
	EXPECT(futex(&word, FUTEX_WAKE_BITSET | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 1), 1);
	pthread_join(t[0], NULL);

	/* REQUEUE: two waiters on word, wake one, move one to word2. */
	word = 0;
	woken = 0;
	waiting = 0;
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, waiter, (void *)(long)FUTEX_WAIT_PRIVATE);
	wait_for_waiters(2);
	/* val3 must equal *uaddr; the count is woken plus requeued. */
	EXPECT(futex(&word, FUTEX_CMP_REQUEUE_PRIVATE, 1, (void *)1L, &word2, 0), 2);
	EXPECT_ERR(futex(&word, FUTEX_CMP_REQUEUE_PRIVATE, 0, (void *)1L, &word2, 5), EAGAIN);
	usleep(50000);
	/* The woken one saw word == 0 and went back to waiting on word. */
	__atomic_store_n(&word, 1, __ATOMIC_SEQ_CST);
	long a = futex(&word2, FUTEX_WAKE_PRIVATE, 10, NULL, NULL, 0);
	long b = futex(&word, FUTEX_WAKE_PRIVATE, 10, NULL, NULL, 0);
	EXPECT(a + b, 2);
	EXPECT(a, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);

	/* Absolute timeout with WAIT_BITSET on CLOCK_MONOTONIC. */
	struct timespec abs;
	clock_gettime(CLOCK_MONOTONIC, &abs);
	abs.tv_nsec += 50000000;
	if (abs.tv_nsec >= 1000000000) {
		abs.tv_sec++;
		abs.tv_nsec -= 1000000000;
	}
	word = 0;
	EXPECT_ERR(futex(&word, FUTEX_WAIT_BITSET_PRIVATE, 0, &abs, NULL, FUTEX_BITSET_MATCH_ANY), ETIMEDOUT);

	/* Shared futex in MAP_SHARED memory across fork. */
	int *shared = EXPECT_MAP(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
	*shared = 0;
	pid_t c = fork();
	if (c == 0) {
		while (__atomic_load_n(shared, __ATOMIC_SEQ_CST) == 0)
			futex(shared, FUTEX_WAIT, 0, NULL, NULL, 0);
		_exit(*shared);
	}
	usleep(100000);
	__atomic_store_n(shared, 9, __ATOMIC_SEQ_CST);
	EXPECT(futex(shared, FUTEX_WAKE, 1, NULL, NULL, 0), 1);
	int st;
	waitpid(c, &st, 0);
	EXPECT(WEXITSTATUS(st), 9);

	/* Errors. */
	EXPECT_ERR(futex((int *)8, FUTEX_WAIT, 0, NULL, NULL, 0), EFAULT);
	EXPECT_ERR(futex((int *)((char *)&word + 1), FUTEX_WAIT, 0, NULL, NULL, 0), EINVAL);
	EXPECT_ERR(futex(&word, 99, 0, NULL, NULL, 0), ENOSYS);
	struct timespec badts = {0, 2000000000L};
	EXPECT_ERR(futex(&word, FUTEX_WAIT, word, &badts, NULL, 0), EINVAL);
	return t_done();
}
