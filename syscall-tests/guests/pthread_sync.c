/* pthread mutex and condition variable with 4 threads: a shared counter
 * under a mutex, a bounded queue with producer and consumers, a barrier,
 * trylock and timedlock answers. */
#include "t.h"
#include <pthread.h>
#include <time.h>

#define THREADS 4
#define ROUNDS 20000

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static long counter;
static int queue[8], qhead, qlen, done_producing;
static long consumed_sum[THREADS];
static pthread_barrier_t barrier;
static int serial_count;

static void *adder(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		pthread_mutex_lock(&mu);
		counter++;
		pthread_mutex_unlock(&mu);
		if (i % 1000 == 0)
			sched_yield();
	}
	if (pthread_barrier_wait(&barrier) == PTHREAD_BARRIER_SERIAL_THREAD)
		__atomic_add_fetch(&serial_count, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void *consumer(void *arg)
{
	long id = (long)arg;
	for (;;) {
		pthread_mutex_lock(&mu);
		while (qlen == 0 && !done_producing)
			pthread_cond_wait(&not_empty, &mu);
		if (qlen == 0 && done_producing) {
			pthread_mutex_unlock(&mu);
			return NULL;
		}
		int v = queue[qhead];
		qhead = (qhead + 1) % 8;
		qlen--;
		pthread_cond_signal(&not_full);
		pthread_mutex_unlock(&mu);
		consumed_sum[id] += v;
	}
}

static void *holder(void *arg)
{
	pthread_mutex_t *m = arg;
	pthread_mutex_lock(m);
	usleep(300000);
	pthread_mutex_unlock(m);
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS];
	EXPECT_RC(pthread_barrier_init(&barrier, NULL, THREADS), 0);
	for (long i = 0; i < THREADS; i++)
		EXPECT_RC(pthread_create(&t[i], NULL, adder, NULL), 0);
	for (int i = 0; i < THREADS; i++)
		EXPECT_RC(pthread_join(t[i], NULL), 0);
	EXPECT(counter, THREADS * ROUNDS);
	EXPECT(serial_count, 1);

	/* One producer (main), three consumers, a queue of 8. */
	for (long i = 0; i < THREADS - 1; i++)
		pthread_create(&t[i], NULL, consumer, (void *)i);
	long produced = 0;
	for (int v = 1; v <= 5000; v++) {
		pthread_mutex_lock(&mu);
		while (qlen == 8)
			pthread_cond_wait(&not_full, &mu);
		queue[(qhead + qlen) % 8] = v;
		qlen++;
		produced += v;
		pthread_cond_signal(&not_empty);
		pthread_mutex_unlock(&mu);
	}
	pthread_mutex_lock(&mu);
	done_producing = 1;
	pthread_cond_broadcast(&not_empty);
	pthread_mutex_unlock(&mu);
	long total = 0;
	for (int i = 0; i < THREADS - 1; i++) {
		pthread_join(t[i], NULL);
		total += consumed_sum[i];
	}
	EXPECT(total, produced);

	/* trylock/timedlock against a holder thread. */
	pthread_mutex_t m2 = PTHREAD_MUTEX_INITIALIZER;
	pthread_create(&t[0], NULL, holder, &m2);
	usleep(100000);
	EXPECT_RC(pthread_mutex_trylock(&m2), EBUSY);
	struct timespec abs;
	clock_gettime(CLOCK_REALTIME, &abs);
	abs.tv_nsec += 50000000;
	if (abs.tv_nsec >= 1000000000) {
		abs.tv_sec++;
		abs.tv_nsec -= 1000000000;
	}
	EXPECT_RC(pthread_mutex_timedlock(&m2, &abs), ETIMEDOUT);
	EXPECT_RC(pthread_mutex_lock(&m2), 0);
	EXPECT_RC(pthread_mutex_unlock(&m2), 0);
	pthread_join(t[0], NULL);

	/* Condvar timed wait times out. */
	pthread_mutex_lock(&mu);
	clock_gettime(CLOCK_REALTIME, &abs);
	abs.tv_nsec += 50000000;
	if (abs.tv_nsec >= 1000000000) {
		abs.tv_sec++;
		abs.tv_nsec -= 1000000000;
	}
	EXPECT_RC(pthread_cond_timedwait(&not_empty, &mu, &abs), ETIMEDOUT);
	pthread_mutex_unlock(&mu);

	/* Error-checking mutex: relock is EDEADLK, unlock by non-owner EPERM. */
	pthread_mutexattr_t at;
	pthread_mutexattr_init(&at);
	pthread_mutexattr_settype(&at, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_t em;
	pthread_mutex_init(&em, &at);
	EXPECT_RC(pthread_mutex_lock(&em), 0);
	EXPECT_RC(pthread_mutex_lock(&em), EDEADLK);
	EXPECT_RC(pthread_mutex_unlock(&em), 0);
	EXPECT_RC(pthread_mutex_unlock(&em), EPERM);
	/* Priority-inheritance mutex (FUTEX_LOCK_PI) contended by a thread. */
	pthread_mutexattr_setprotocol(&at, PTHREAD_PRIO_INHERIT);
	pthread_mutex_t pim;
	EXPECT_RC(pthread_mutex_init(&pim, &at), 0);
	pthread_create(&t[0], NULL, holder, &pim);
	usleep(100000);
	EXPECT_RC(pthread_mutex_trylock(&pim), EBUSY);
	EXPECT_RC(pthread_mutex_lock(&pim), 0);
	EXPECT_RC(pthread_mutex_unlock(&pim), 0);
	pthread_join(t[0], NULL);
	return t_done();
}
