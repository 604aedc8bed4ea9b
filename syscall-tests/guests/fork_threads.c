/* fork in a multi-threaded process: the child has only the forking thread,
 * a copy of memory at the moment of fork, and can use a mutex that no other
 * thread held; the parent's threads keep running. */
#include "t.h"
#include <pthread.h>
#include <sys/wait.h>

static volatile long ticks;
static volatile int stop;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void *ticker(void *arg)
{
	(void)arg;
	while (!stop) {
		pthread_mutex_lock(&mu);
		ticks++;
		pthread_mutex_unlock(&mu);
		usleep(1000);
	}
	return NULL;
}

static int threads_in_status(void)
{
	char buf[4096];
	if (t_slurp("/proc/self/status", buf, sizeof buf) < 0)
		return -1;
	char *p = strstr(buf, "\nThreads:");
	return p ? atoi(p + 9) : -1;
}

static void *forker(void *arg)
{
	(void)arg;
	pid_t c = fork();
	if (c == 0) {
		/* In the child, this thread is the only (and main) one. */
		int ok = syscall(SYS_gettid) == getpid() && threads_in_status() == 1;
		_exit(ok ? 0 : 1);
	}
	int st;
	waitpid(c, &st, 0);
	return (void *)(long)(WIFEXITED(st) ? WEXITSTATUS(st) : 100);
}

int main(void)
{
	pthread_t t[3];
	for (int i = 0; i < 3; i++)
		EXPECT_RC(pthread_create(&t[i], NULL, ticker, NULL), 0);
	usleep(50000);
	EXPECT(threads_in_status(), 4);

	int p[2];
	EXPECT(pipe(p), 0);
	pthread_mutex_lock(&mu);
	long at_fork = ticks;
	pid_t c = fork();
	if (c == 0) {
		pthread_mutex_unlock(&mu);
		long before = ticks;
		usleep(100000);
		/* Nobody increments ticks in the child. */
		int ok = ticks == before && ticks == at_fork && threads_in_status() == 1 &&
			 syscall(SYS_gettid) == getpid();
		/* The mutex works (we held it at fork). */
		ok = ok && pthread_mutex_lock(&mu) == 0 && pthread_mutex_unlock(&mu) == 0;
		/* Threads can be created in the child. */
		stop = 0;
		pthread_t ct;
		ok = ok && pthread_create(&ct, NULL, ticker, NULL) == 0;
		/* Until the new thread has ticked (a loaded machine may take a
		 * while to run it), at most 10 s. */
		for (int i = 0; i < 1000 && ticks == before; i++)
			usleep(10000);
		stop = 1;
		ok = ok && pthread_join(ct, NULL) == 0 && ticks > before;
		char r = ok ? 'y' : 'n';
		write(p[1], &r, 1);
		_exit(0);
	}
	pthread_mutex_unlock(&mu);
	char r;
	EXPECT(read(p[0], &r, 1), 1);
	EXPECT(r, 'y');
	int st;
	EXPECT_TRUE(waitpid(c, &st, 0) == c);
	EXPECT(WEXITSTATUS(st), 0);
	/* The parent's threads went on meanwhile. */
	EXPECT_TRUE(ticks > at_fork);
	/* Fork from a non-main thread. */
	pthread_t f;
	void *ret;
	pthread_create(&f, NULL, forker, NULL);
	pthread_join(f, &ret);
	EXPECT((long)ret, 0);
	/* Many forks while threads run. */
	int good = 0;
	for (int i = 0; i < 20; i++) {
		pid_t k = fork();
		if (k == 0)
			_exit(threads_in_status() == 1 ? 0 : 1);
		if (waitpid(k, &st, 0) == k && WIFEXITED(st) && WEXITSTATUS(st) == 0)
			good++;
	}
	EXPECT(good, 20);
	stop = 1;
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	return t_done();
}
