/* sched_getaffinity, sched_yield, scheduler policy, getcpu; a thread asks
 * about itself by its own thread ID, as pthread_getattr_np does. */
#include "t.h"
#include <pthread.h>
#include <sched.h>

static void *by_tid(void *arg)
{
	(void)arg;
	cpu_set_t set;
	pid_t tid = gettid();
	EXPECT_TRUE(tid != getpid());
	EXPECT(sched_getaffinity(tid, sizeof set, &set), 0);
	EXPECT(sched_getscheduler(tid), SCHED_OTHER);
	pthread_attr_t attr;
	EXPECT_RC(pthread_getattr_np(pthread_self(), &attr), 0);
	pthread_attr_destroy(&attr);
	return NULL;
}

int main(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	EXPECT(sched_getaffinity(0, sizeof set, &set), 0);
	EXPECT_TRUE(CPU_COUNT(&set) >= 1);
	long r = syscall(SYS_sched_getaffinity, 0, sizeof set, &set);
	EXPECT_TRUE(r > 0 && r % 8 == 0 && r <= (long)sizeof set);
	EXPECT_ERR(syscall(SYS_sched_getaffinity, 0, 4, &set), EINVAL);
	EXPECT_ERR(syscall(SYS_sched_getaffinity, 0, sizeof set, BADPTR), EFAULT);
	EXPECT(sched_setaffinity(0, sizeof set, &set), 0);
	EXPECT(sched_yield(), 0);
	EXPECT(sched_getscheduler(0), SCHED_OTHER);
	struct sched_param sp;
	EXPECT(sched_getparam(0, &sp), 0);
	EXPECT(sp.sched_priority, 0);
	EXPECT(sched_get_priority_max(SCHED_OTHER), 0);
	EXPECT(sched_get_priority_max(SCHED_FIFO), 99);
	EXPECT_ERR(sched_get_priority_max(42), EINVAL);
	unsigned cpu = 999, node = 999;
	EXPECT(getcpu(&cpu, &node), 0);
	EXPECT_TRUE(CPU_ISSET(cpu, &set));
	EXPECT_TRUE(sysconf(_SC_NPROCESSORS_ONLN) >= 1);
	pthread_t t;
	/* Silently: the thread prints next. */
	if (pthread_create(&t, NULL, by_tid, NULL) != 0)
		t_fail("pthread_create");
	EXPECT_RC(pthread_join(t, NULL), 0);
	return t_done();
}
