/* Robust mutexes: the owner thread exits (and a process dies) holding the
 * lock; the next locker gets EOWNERDEAD, makes it consistent, and goes on;
 * without pthread_mutex_consistent it becomes ENOTRECOVERABLE. */
#include "t.h"
#include <pthread.h>
#include <sys/wait.h>

static pthread_mutex_t mu;

static void *die_holding(void *arg)
{
	pthread_mutex_t *m = arg;
	pthread_mutex_lock(m);
	return NULL; /* thread exit with the lock held */
}

int main(void)
{
	pthread_mutexattr_t at;
	pthread_mutexattr_init(&at);
	EXPECT_RC(pthread_mutexattr_setrobust(&at, PTHREAD_MUTEX_ROBUST), 0);
	EXPECT_RC(pthread_mutex_init(&mu, &at), 0);

	pthread_t t;
	pthread_create(&t, NULL, die_holding, &mu);
	pthread_join(t, NULL);
	EXPECT_RC(pthread_mutex_lock(&mu), EOWNERDEAD);
	EXPECT_RC(pthread_mutex_consistent(&mu), 0);
	EXPECT_RC(pthread_mutex_unlock(&mu), 0);
	EXPECT_RC(pthread_mutex_lock(&mu), 0);
	EXPECT_RC(pthread_mutex_unlock(&mu), 0);

	/* Owner dies again; this time unlock without consistent. */
	pthread_create(&t, NULL, die_holding, &mu);
	pthread_join(t, NULL);
	EXPECT_RC(pthread_mutex_trylock(&mu), EOWNERDEAD);
	EXPECT_RC(pthread_mutex_unlock(&mu), 0);
	EXPECT_RC(pthread_mutex_lock(&mu), ENOTRECOVERABLE);

	/* A waiter blocked on the lock is woken by the owner's death. */
	pthread_mutex_t m2;
	EXPECT_RC(pthread_mutex_init(&m2, &at), 0);
	pthread_create(&t, NULL, die_holding, &m2);
	pthread_join(t, NULL);
	EXPECT_RC(pthread_mutex_lock(&m2), EOWNERDEAD);
	pthread_mutex_consistent(&m2);
	pthread_mutex_unlock(&m2);

	/* Across processes: a process-shared robust mutex in MAP_SHARED memory;
	 * the child dies (SIGKILL) holding it while the parent waits for it. */
	pthread_mutexattr_setpshared(&at, PTHREAD_PROCESS_SHARED);
	pthread_mutex_t *sm = EXPECT_MAP(mmap(NULL, 4096, PROT_READ | PROT_WRITE,
					      MAP_SHARED | MAP_ANONYMOUS, -1, 0));
	EXPECT_RC(pthread_mutex_init(sm, &at), 0);
	int p[2];
	pipe(p);
	pid_t c = fork();
	if (c == 0) {
		pthread_mutex_lock(sm);
		write(p[1], "L", 1);
		for (;;)
			pause();
	}
	char b;
	EXPECT(read(p[0], &b, 1), 1);
	EXPECT_RC(pthread_mutex_trylock(sm), EBUSY);
	EXPECT(kill(c, SIGKILL), 0);
	EXPECT_RC(pthread_mutex_lock(sm), EOWNERDEAD);
	EXPECT_RC(pthread_mutex_consistent(sm), 0);
	EXPECT_RC(pthread_mutex_unlock(sm), 0);
	waitpid(c, NULL, 0);
	/* And a child that just exits holding it. */
	c = fork();
	if (c == 0) {
		pthread_mutex_lock(sm);
		_exit(0);
	}
	waitpid(c, NULL, 0);
	EXPECT_RC(pthread_mutex_lock(sm), EOWNERDEAD);
	/* get_robust_list reports our list head. */
	void *head;
	size_t len;
	EXPECT(syscall(SYS_get_robust_list, 0, &head, &len), 0);
	EXPECT_TRUE(head != NULL && len == 24);
	return t_done();
}
