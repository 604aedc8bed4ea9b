/* Nice values and fair scheduling policies: setpriority/getpriority by
 * thread, process group and user, sched_setscheduler/getscheduler and
 * sched_setattr/getattr, what a child inherits, and what a caller without
 * CAP_SYS_NICE may not do. */
#include "caps.h"
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>

struct attr {
	unsigned size, policy;
	unsigned long long flags;
	int nice;
	unsigned prio;
	unsigned long long runtime, deadline, period;
	unsigned util_min, util_max;
};

static int stat_nice(void)
{
	char buf[512];
	t_slurp("/proc/self/stat", buf, sizeof buf);
	char *p = strrchr(buf, ')');
	int prio = 0, nice = 0;
	/* fields 18 and 19 are the 16th and 17th after the name */
	for (int i = 0; i < 16 && p; i++)
		p = strchr(p + 1, ' ');
	if (p && sscanf(p, " %d %d", &prio, &nice) == 2 && prio == 20 + nice)
		return nice;
	return -100;
}

static void unprivileged(void)
{
	struct sets s = get();
	s.eff &= ~(1ULL << CAP_SYS_NICE);
	EXPECT_OK(set(s));
	EXPECT(getpriority(PRIO_PROCESS, 0), 10);
	EXPECT_ERR(setpriority(PRIO_PROCESS, 0, 5), EACCES);
	EXPECT_OK(setpriority(PRIO_PROCESS, 0, 15));
	struct sched_param sp = {1};
	EXPECT_ERR(sched_setscheduler(0, SCHED_FIFO, &sp), EPERM);
	sp.sched_priority = 0;
	EXPECT_OK(sched_setscheduler(0, SCHED_IDLE, &sp));
	EXPECT_ERR(sched_setscheduler(0, SCHED_OTHER, &sp), EPERM);
	/* SCHED_IDLE has no nice value to check or set. */
	struct attr a = {.size = 48, .policy = SCHED_IDLE, .nice = 12};
	EXPECT_OK(syscall(SYS_sched_setattr, 0, &a, 0));
	EXPECT(getpriority(PRIO_PROCESS, 0), 15);
	a.policy = SCHED_BATCH;
	EXPECT_ERR(syscall(SYS_sched_setattr, 0, &a, 0), EPERM);
}

int main(void)
{
	struct rlimit zero = {0, 0};
	EXPECT_OK(setrlimit(RLIMIT_NICE, &zero));
	EXPECT(getpriority(PRIO_PROCESS, 0), 0);
	EXPECT_OK(setpriority(PRIO_PROCESS, 0, 5));
	EXPECT(getpriority(PRIO_PROCESS, 0), 5);
	EXPECT(stat_nice(), 5);
	EXPECT_OK(setpriority(PRIO_PROCESS, 0, 100));
	EXPECT(getpriority(PRIO_PROCESS, 0), 19);
	EXPECT_OK(setpriority(PRIO_PROCESS, getpid(), 10));
	EXPECT(getpriority(PRIO_PROCESS, getpid()), 10);
	EXPECT_ERR(getpriority(PRIO_PROCESS, 999999), ESRCH);
	EXPECT_ERR(getpriority(3, 0), EINVAL);
	EXPECT_ERR(setpriority(PRIO_PGRP, 999999, 1), ESRCH);

	/* A child inherits the value; the parent changes the child's, and
	 * its process group's. */
	int p[2], q[2];
	EXPECT_OK(pipe(p));
	EXPECT_OK(pipe(q));
	pid_t c = fork();
	if (c == 0) {
		char x;
		/* It reports by its exit status (no output to interleave). */
		setpgid(0, 0);
		int inherited = getpriority(PRIO_PROCESS, 0) == 10;
		write(p[1], "r", 1);
		read(q[0], &x, 1);
		_exit(inherited && getpriority(PRIO_PROCESS, 0) == 7 && stat_nice() == 7 ? 0 : 1);
	}
	char x;
	EXPECT(read(p[0], &x, 1), 1);
	EXPECT_OK(setpriority(PRIO_PROCESS, c, 12));
	EXPECT(getpriority(PRIO_PROCESS, c), 12);
	EXPECT_OK(setpriority(PRIO_PGRP, c, 7));
	EXPECT(getpriority(PRIO_PGRP, c), 7);
	EXPECT(write(q[1], "g", 1), 1);
	int st;
	EXPECT_TRUE(waitpid(c, &st, 0) == c);
	EXPECT(st, 0);
	EXPECT(getpriority(PRIO_PROCESS, 0), 10);

	/* Fair policies. */
	struct sched_param sp = {0};
	EXPECT(sched_getscheduler(0), SCHED_OTHER);
	EXPECT_OK(sched_setscheduler(0, SCHED_BATCH, &sp));
	EXPECT(sched_getscheduler(0), SCHED_BATCH);
	sp.sched_priority = 1;
	EXPECT_ERR(sched_setscheduler(0, SCHED_BATCH, &sp), EINVAL);
	EXPECT_ERR(sched_setscheduler(0, 42, &sp), EINVAL);
	EXPECT_ERR(sched_getscheduler(-1), EINVAL);
	EXPECT_ERR(sched_getscheduler(999999), ESRCH);

	struct attr a;
	memset(&a, 0xff, sizeof a);
	EXPECT_OK(syscall(SYS_sched_getattr, 0, &a, 48, 0));
	EXPECT(a.size, 48);
	EXPECT(a.policy, SCHED_BATCH);
	EXPECT(a.nice, 10);
	EXPECT(a.prio, 0);
	EXPECT_ERR(syscall(SYS_sched_getattr, 0, &a, 47, 0), EINVAL);
	EXPECT_ERR(syscall(SYS_sched_getattr, 0, &a, 48, 1), EINVAL);
	memset(&a, 0, sizeof a);
	a.size = 0;
	a.policy = SCHED_OTHER;
	a.nice = 3;
	EXPECT_OK(syscall(SYS_sched_setattr, 0, &a, 0));
	EXPECT(getpriority(PRIO_PROCESS, 0), 3);
	EXPECT(sched_getscheduler(0), SCHED_OTHER);
	a.size = 48;
	a.nice = 25; /* clamped */
	EXPECT_OK(syscall(SYS_sched_setattr, 0, &a, 0));
	EXPECT(getpriority(PRIO_PROCESS, 0), 19);
	a.nice = 4;
	EXPECT_ERR(syscall(SYS_sched_setattr, 0, &a, 1), EINVAL);
	a.flags = 0x80;
	EXPECT_ERR(syscall(SYS_sched_setattr, 0, &a, 0), EINVAL);
	a.flags = 0;
	a.size = 30;
	EXPECT_ERR(syscall(SYS_sched_setattr, 0, &a, 0), E2BIG);
	EXPECT(a.size, 56);
	EXPECT_OK(setpriority(PRIO_PROCESS, 0, 10));

	in_child("without CAP_SYS_NICE", unprivileged);
	return t_done();
}
