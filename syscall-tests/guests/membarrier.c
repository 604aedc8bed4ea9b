/* membarrier(2): QUERY names what the rest of the guest uses; errors for
 * flags, unknown commands and an expedited barrier before registering;
 * registrations as GET_REGISTRATIONS reports them, after fork and after
 * execve; barriers return while other threads run guest code and while
 * others sleep in the kernel. */
#include "t.h"

#include <linux/membarrier.h>
#include <pthread.h>

#ifndef MEMBARRIER_CMD_GET_REGISTRATIONS
#define MEMBARRIER_CMD_GET_REGISTRATIONS (1 << 9)
#endif

static volatile int stop;
static volatile unsigned long spins[2];

static void *spin(void *arg)
{
	long i = (long)arg;
	while (!stop)
		spins[i]++;
	return NULL;
}

static void *sleeper(void *arg)
{
	(void)arg;
	while (!stop)
		usleep(1000);
	return NULL;
}

static long mb(int cmd, unsigned flags)
{
	return syscall(SYS_membarrier, cmd, flags, 0);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "probe") == 0) {
		/* After execve: a new address space, nothing registered. */
		CHECK(mb(MEMBARRIER_CMD_GET_REGISTRATIONS, 0));
		return t_done();
	}
	const long used = MEMBARRIER_CMD_GLOBAL | MEMBARRIER_CMD_GLOBAL_EXPEDITED |
			  MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED |
			  MEMBARRIER_CMD_PRIVATE_EXPEDITED |
			  MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED |
			  MEMBARRIER_CMD_GET_REGISTRATIONS;
	long q = mb(MEMBARRIER_CMD_QUERY, 0);
	EXPECT_TRUE(q >= 0 && (q & used) == used);
	EXPECT_ERR(mb(MEMBARRIER_CMD_QUERY, 1), EINVAL);
	EXPECT_ERR(mb(MEMBARRIER_CMD_GLOBAL, 1), EINVAL);
	EXPECT_ERR(mb(1 << 20, 0), EINVAL);
	EXPECT_ERR(mb(MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0), EPERM);
	EXPECT(mb(MEMBARRIER_CMD_GET_REGISTRATIONS, 0), 0);

	pthread_t th[3];
	pthread_create(&th[0], NULL, spin, (void *)0);
	pthread_create(&th[1], NULL, spin, (void *)1);
	pthread_create(&th[2], NULL, sleeper, NULL);
	while (!spins[0] || !spins[1])
		sched_yield();

	EXPECT(mb(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0), 0);
	EXPECT(mb(MEMBARRIER_CMD_GET_REGISTRATIONS, 0),
	       MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED);
	int ok = 1;
	for (int i = 0; i < 200; i++)
		ok &= mb(MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) == 0;
	EXPECT_TRUE(ok);
	EXPECT(mb(MEMBARRIER_CMD_GLOBAL, 0), 0);
	EXPECT(mb(MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0), 0);
	EXPECT(mb(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0), 0);
	EXPECT(mb(MEMBARRIER_CMD_GET_REGISTRATIONS, 0),
	       MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED |
		       MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED);

	/* The spinning threads still ran after all those barriers. */
	unsigned long before = spins[0];
	while (spins[0] == before)
		sched_yield();
	EXPECT_TRUE(spins[0] != before);
	stop = 1;
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);

	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		CHECK(mb(MEMBARRIER_CMD_GET_REGISTRATIONS, 0));
		fflush(stdout);
		char *args[] = { argv[0], "probe", NULL };
		execv("/proc/self/exe", args);
		_exit(99);
	}
	int st;
	waitpid(pid, &st, 0);
	EXPECT(WEXITSTATUS(st), 0);
	return t_done();
}
