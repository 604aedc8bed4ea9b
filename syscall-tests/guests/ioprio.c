/* ioprio_get, ioprio_set: the default, the classes and levels Linux
 * takes, who may set whose, what fork and threads inherit, and how a
 * process group's priorities combine. */
#include "t.h"
#include <pthread.h>

#define WHO_PROCESS 1
#define WHO_PGRP 2
#define WHO_USER 3
#define PRIO(class, data) ((class) << 13 | (data))

static long get(int which, int who)
{
	return syscall(SYS_ioprio_get, which, who);
}

static long set(int which, int who, int prio)
{
	return syscall(SYS_ioprio_set, which, who, prio);
}

/* What the thread saw, printed by main after the join (two threads'
 * lines would interleave in any order). */
static long seen[3];

static void *thread_main(void *arg)
{
	(void)arg;
	seen[0] = get(WHO_PROCESS, 0);
	seen[1] = set(WHO_PROCESS, 0, PRIO(3, 0));
	seen[2] = get(WHO_PROCESS, 0);
	return NULL;
}

int main(void)
{
	/* A process group of this process alone (in the sandbox it leads
	 * one already, and a session too). */
	if (getpgrp() != getpid())
		setpgid(0, 0);
	EXPECT_TRUE(getpgrp() == getpid());
	EXPECT(get(WHO_PROCESS, 0), 0);
	EXPECT(get(WHO_PROCESS, getpid()), 0);
	/* A group's priority counts one of no class as best-effort 4. */
	EXPECT(get(WHO_PGRP, 0), PRIO(2, 4));
	EXPECT_ERR(get(0, 0), EINVAL);
	EXPECT_ERR(get(4, 0), EINVAL);
	EXPECT_ERR(get(WHO_PROCESS, 999999), ESRCH);
	EXPECT_ERR(get(WHO_PROCESS, -1), ESRCH);
	EXPECT_ERR(get(WHO_USER, 54321), ESRCH);

	EXPECT(set(WHO_PROCESS, 0, PRIO(2, 7)), 0);
	EXPECT(get(WHO_PROCESS, 0), PRIO(2, 7));
	/* Bits 3 to 12 are hints, taken as they are. */
	EXPECT(set(WHO_PROCESS, 0, PRIO(2, 1 << 3 | 3)), 0);
	EXPECT(get(WHO_PROCESS, 0), PRIO(2, 1 << 3 | 3));
	EXPECT(set(WHO_PROCESS, 0, PRIO(1, 0)), 0);
	EXPECT(set(WHO_PROCESS, 0, PRIO(3, 5)), 0);
	EXPECT(set(WHO_PROCESS, 0, 0), 0);
	EXPECT(get(WHO_PROCESS, 0), 0);
	EXPECT_ERR(set(WHO_PROCESS, 0, PRIO(4, 0)), EINVAL);
	EXPECT_ERR(set(WHO_PROCESS, 0, PRIO(0, 5)), EINVAL);
	EXPECT_ERR(set(0, 0, 0), EINVAL);
	EXPECT_ERR(set(0, 0, PRIO(7, 0)), EINVAL);
	EXPECT_ERR(set(WHO_PROCESS, 999999, 0), ESRCH);
	EXPECT_ERR(set(WHO_USER, 54321, 0), ESRCH);

	/* Threads and children inherit a priority with a class. */
	EXPECT(set(WHO_PROCESS, 0, PRIO(2, 2)), 0);
	pthread_t th;
	EXPECT_RC(pthread_create(&th, NULL, thread_main, NULL), 0);
	pthread_join(th, NULL);
	EXPECT(seen[0], PRIO(2, 2));
	EXPECT(seen[1], 0);
	EXPECT(seen[2], PRIO(3, 0));
	EXPECT(get(WHO_PROCESS, 0), PRIO(2, 2));

	int go[2], done[2];
	EXPECT(pipe(go), 0);
	EXPECT(pipe(done), 0);
	pid_t child = fork();
	if (child == 0) {
		char c;
		EXPECT(get(WHO_PROCESS, 0), PRIO(2, 2));
		EXPECT(set(WHO_PROCESS, 0, PRIO(3, 0)), 0);
		write(done[1], "x", 1);
		read(go[0], &c, 1);
		/* Set for the whole group by the parent. */
		EXPECT(get(WHO_PROCESS, 0), PRIO(2, 6));
		if (setresuid(1000, 1000, 1000))
			_exit(3);
		EXPECT(set(WHO_PROCESS, 0, PRIO(2, 1)), 0);
		EXPECT(set(WHO_PROCESS, 0, PRIO(3, 0)), 0);
		EXPECT_ERR(set(WHO_PROCESS, 0, PRIO(1, 0)), EPERM);
		EXPECT_ERR(set(WHO_PROCESS, getppid(), PRIO(2, 1)), EPERM);
		EXPECT(get(WHO_PROCESS, getppid()), PRIO(2, 6));
		_exit(t_failures ? 1 : 0);
	}
	char c;
	EXPECT(read(done[0], &c, 1), 1);
	/* A group's priority is the best of its members'. */
	EXPECT(get(WHO_PGRP, 0), PRIO(2, 2));
	EXPECT(set(WHO_PROCESS, 0, 0), 0);
	EXPECT(get(WHO_PGRP, 0), PRIO(2, 4));
	EXPECT(get(WHO_PROCESS, child), PRIO(3, 0));
	EXPECT(set(WHO_PGRP, 0, PRIO(2, 6)), 0);
	EXPECT(get(WHO_PROCESS, 0), PRIO(2, 6));
	write(go[1], "x", 1);
	int st;
	EXPECT_TRUE(waitpid(child, &st, 0) == child);
	EXPECT(WEXITSTATUS(st), 0);
	/* A child of no class inherits nothing. */
	EXPECT(set(WHO_PROCESS, 0, PRIO(0, 0) | 1 << 3), 0);
	child = fork();
	if (child == 0)
		_exit(get(WHO_PROCESS, 0) == 0 ? 0 : 1);
	EXPECT_TRUE(waitpid(child, &st, 0) == child);
	EXPECT(WEXITSTATUS(st), 0);
	return t_done();
}
