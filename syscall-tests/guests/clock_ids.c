/* Every kind of clock id through every clock call: the fixed clocks, ids
 * that name nothing, and CPU-time clocks of this process, this thread,
 * another thread, a child and a pid that does not exist. The answers
 * (errno, or a resolution) are printed; the native run is Linux's. */
#include "t.h"
#include <pthread.h>
#include <signal.h>
#include <time.h>

/* include/linux/posix-timers.h's encoding of CPU-time clocks. */
#define PROCESS_CLOCK(pid, which) ((clockid_t)((~(unsigned)(pid)) << 3) | (which))
#define THREAD_CLOCK(tid, which) (PROCESS_CLOCK(tid, which) | 4)

static const char *res(long r)
{
	return r == 0 ? "ok" : errname(errno);
}

static void walk(const char *name, clockid_t id)
{
	struct timespec ts = {0, 0}, bad = {0, -1};
	long r = syscall(SYS_clock_getres, id, &ts);
	printf("%s getres: %s", name, res(r));
	if (r == 0)
		printf(" %ld.%09ld", (long)ts.tv_sec, ts.tv_nsec);
	r = syscall(SYS_clock_getres, id, NULL);
	printf(" | getres(NULL): %s", res(r));
	r = syscall(SYS_clock_gettime, id, &ts);
	printf(" | gettime: %s", res(r));
	/* An absolute sleep until 0 and a relative one of 0 both return at once. */
	struct timespec zero = {0, 0};
	r = syscall(SYS_clock_nanosleep, id, TIMER_ABSTIME, &zero, NULL);
	printf(" | nanosleep(abs 0): %s", res(r));
	r = syscall(SYS_clock_nanosleep, id, 0, &zero, NULL);
	printf(" | nanosleep(0): %s", res(r));
	/* An invalid time, so that even a privileged native run sets nothing. */
	r = syscall(SYS_clock_settime, id, &bad);
	printf(" | settime(bad): %s", res(r));
	struct sigevent sev = {.sigev_notify = SIGEV_NONE};
	int timer = -1;
	r = syscall(SYS_timer_create, id, &sev, &timer);
	printf(" | timer_create: %s\n", res(r));
	if (r == 0)
		syscall(SYS_timer_delete, timer);
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static pid_t other_tid;
static int done;

static void *other(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	other_tid = gettid();
	pthread_cond_broadcast(&cond);
	while (!done)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	return NULL;
}

int main(void)
{
	static const char *fixed[] = {"REALTIME", "MONOTONIC", "PROCESS_CPUTIME", "THREAD_CPUTIME",
				      "MONOTONIC_RAW", "REALTIME_COARSE", "MONOTONIC_COARSE",
				      "BOOTTIME", "REALTIME_ALARM", "BOOTTIME_ALARM", "SGI_CYCLE",
				      "TAI", "12", "15", "16"};
	static const int ids[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15, 16};
	for (unsigned i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		walk(fixed[i], ids[i]);
	walk("INT_MAX", 0x7fffffff);
	walk("INT_MIN", (clockid_t)0x80000000);
	for (int id = -1; id >= -8; id--) {
		char name[16];
		snprintf(name, sizeof(name), "%d", id);
		walk(name, id);
	}

	pthread_t t;
	pthread_mutex_lock(&lock);
	pthread_create(&t, NULL, other, NULL);
	while (!other_tid)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);

	pid_t child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	for (int which = 0; which < 4; which++) {
		char name[48];
		snprintf(name, sizeof(name), "self process %d", which);
		walk(name, PROCESS_CLOCK(getpid(), which));
		snprintf(name, sizeof(name), "self thread %d", which);
		walk(name, THREAD_CLOCK(gettid(), which));
	}
	walk("other thread", THREAD_CLOCK(other_tid, 2));
	walk("other thread as process", PROCESS_CLOCK(other_tid, 2));
	walk("child process", PROCESS_CLOCK(child, 2));
	walk("child as thread", THREAD_CLOCK(child, 2));
	walk("missing process", PROCESS_CLOCK(999999, 2));
	walk("missing thread", THREAD_CLOCK(999999, 2));
	/* Clock ids that name a descriptor (CLOCKFD): only PTP devices have one. */
	walk("fd 0 clock", (clockid_t)((~0u << 3) | 3));

	EXPECT_ERR(syscall(SYS_clock_getres, 12345, NULL), EINVAL);
	EXPECT(syscall(SYS_clock_getres, CLOCK_PROCESS_CPUTIME_ID, NULL), 0);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	pthread_mutex_lock(&lock);
	done = 1;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	pthread_join(t, NULL);
	return t_done();
}
