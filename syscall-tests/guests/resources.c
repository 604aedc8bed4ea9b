/* prlimit64 on self and on a child, getrusage (self, children, thread),
 * sched_getaffinity, getcpu, and prctl PR_SET_NAME/PR_GET_NAME with
 * /proc/self/comm. */
#include "t.h"
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>

static void burn(void)
{
	volatile unsigned long x = 0;
	for (unsigned long i = 0; i < 60000000UL; i++)
		x += i;
}

static void *named(void *arg)
{
	(void)arg;
	char name[16] = {0};
	prctl(PR_SET_NAME, "worker-thread");
	prctl(PR_GET_NAME, name);
	return (void *)(long)(strcmp(name, "worker-thread") == 0);
}

int main(void)
{
	/* prlimit64 on a child changes the child's limit. */
	int p[2], q[2];
	pipe(p);
	pipe(q);
	pid_t c = fork();
	if (c == 0) {
		char b;
		read(p[0], &b, 1);
		struct rlimit r;
		getrlimit(RLIMIT_NOFILE, &r);
		char ok = r.rlim_cur == 40 ? 'y' : 'n';
		write(q[1], &ok, 1);
		_exit(0);
	}
	struct rlimit nl = {40, 0}, ol;
	getrlimit(RLIMIT_NOFILE, &ol);
	nl.rlim_max = ol.rlim_max;
	EXPECT(prlimit(c, RLIMIT_NOFILE, &nl, &ol), 0);
	struct rlimit chk;
	EXPECT(prlimit(c, RLIMIT_NOFILE, NULL, &chk), 0);
	EXPECT(chk.rlim_cur, 40);
	write(p[1], "g", 1);
	char ok;
	EXPECT(read(q[0], &ok, 1), 1);
	EXPECT(ok, 'y');
	waitpid(c, NULL, 0);
	EXPECT_ERR(prlimit(999999, RLIMIT_NOFILE, NULL, &chk), ESRCH);
	/* Raising the hard limit above itself needs privilege we have as root
	 * natively; lowering it is always allowed and irreversible. */
	struct rlimit cpu;
	EXPECT(getrlimit(RLIMIT_CPU, &cpu), 0);
	EXPECT_TRUE(cpu.rlim_cur == RLIM_INFINITY);
	EXPECT(getrlimit(RLIMIT_NPROC, &cpu), 0);

	/* getrusage. */
	struct rusage ru0, ru1, ruc;
	EXPECT(getrusage(RUSAGE_SELF, &ru0), 0);
	burn();
	EXPECT(getrusage(RUSAGE_SELF, &ru1), 0);
	long us0 = ru0.ru_utime.tv_sec * 1000000 + ru0.ru_utime.tv_usec;
	long us1 = ru1.ru_utime.tv_sec * 1000000 + ru1.ru_utime.tv_usec;
	EXPECT_TRUE(us1 > us0);
	EXPECT_TRUE(ru1.ru_maxrss > 0);
	EXPECT(getrusage(RUSAGE_CHILDREN, &ruc), 0);
	long cus0 = ruc.ru_utime.tv_sec * 1000000 + ruc.ru_utime.tv_usec;
	c = fork();
	if (c == 0) {
		burn();
		_exit(0);
	}
	waitpid(c, NULL, 0);
	EXPECT(getrusage(RUSAGE_CHILDREN, &ruc), 0);
	long cus1 = ruc.ru_utime.tv_sec * 1000000 + ruc.ru_utime.tv_usec;
	EXPECT_TRUE(cus1 > cus0);
	EXPECT(getrusage(RUSAGE_THREAD, &ru1), 0);
	EXPECT_ERR(getrusage(5, &ru1), EINVAL);
	EXPECT_ERR(getrusage(RUSAGE_SELF, BADPTR), EFAULT);

	/* Affinity and getcpu agree. */
	cpu_set_t set;
	CPU_ZERO(&set);
	EXPECT(sched_getaffinity(0, sizeof set, &set), 0);
	EXPECT_TRUE(CPU_COUNT(&set) >= 1);
	EXPECT_TRUE(CPU_COUNT(&set) == sysconf(_SC_NPROCESSORS_ONLN));
	/* The raw syscall returns the size of the kernel's mask in bytes. */
	long r = syscall(SYS_sched_getaffinity, 0, sizeof set, &set);
	EXPECT_TRUE(r > 0 && r % 8 == 0 && r <= (long)sizeof set);
	EXPECT_ERR(syscall(SYS_sched_getaffinity, 0, 1, &set), EINVAL);
	EXPECT_ERR(sched_getaffinity(999999, sizeof set, &set), ESRCH);
	unsigned cpu_now = 999, node = 999;
	EXPECT(syscall(SYS_getcpu, &cpu_now, &node, NULL), 0);
	EXPECT_TRUE(CPU_ISSET(cpu_now, &set));
	EXPECT(node, 0);
	/* Pin to the first allowed CPU: getcpu then reports it. */
	int first = 0;
	while (!CPU_ISSET(first, &set))
		first++;
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(first, &one);
	EXPECT(sched_setaffinity(0, sizeof one, &one), 0);
	sched_yield();
	EXPECT(syscall(SYS_getcpu, &cpu_now, NULL, NULL), 0);
	EXPECT_TRUE(cpu_now == (unsigned)first);
	EXPECT(sched_getaffinity(0, sizeof set, &set), 0);
	EXPECT(CPU_COUNT(&set), 1);

	/* prctl names: truncated to 15 bytes, visible in /proc. */
	char name[32] = {0}, comm[64];
	EXPECT(prctl(PR_GET_NAME, name), 0);
	SHOW("initial name %s", name);
	EXPECT(prctl(PR_SET_NAME, "a-much-longer-name-than-16"), 0);
	memset(name, 'x', sizeof name);
	EXPECT(prctl(PR_GET_NAME, name), 0);
	SHOW("name now %s", name);
	EXPECT(strlen(name), 15);
	EXPECT(t_slurp("/proc/self/comm", comm, sizeof comm), 16);
	SHOW("comm %s", comm);
	pthread_t t;
	void *ret;
	pthread_create(&t, NULL, named, NULL);
	pthread_join(t, &ret);
	EXPECT((long)ret, 1);
	EXPECT(prctl(PR_GET_NAME, name), 0);
	SHOW("main thread keeps %s", name);
	EXPECT_ERR(prctl(PR_SET_NAME, BADPTR), EFAULT);
	EXPECT_ERR(prctl(0x7fff1234, 0, 0, 0, 0), EINVAL);
	/* PR_SET_PDEATHSIG round trip. */
	int sig = -1;
	EXPECT(prctl(PR_SET_PDEATHSIG, SIGUSR1), 0);
	EXPECT(prctl(PR_GET_PDEATHSIG, &sig), 0);
	EXPECT(sig, SIGUSR1);
	EXPECT_ERR(prctl(PR_SET_PDEATHSIG, 200), EINVAL);
	return t_done();
}
