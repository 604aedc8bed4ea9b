/* A non-main thread calls execve while other threads run: the others are
 * killed, the process keeps its pid, the new image has one thread, and
 * O_CLOEXEC descriptors are closed while others survive. */
#include "t.h"
#include <pthread.h>

static volatile int spin_go = 1;

static void *spinner(void *arg)
{
	(void)arg;
	volatile unsigned long n = 0;
	while (spin_go)
		n++;
	return NULL;
}

static void *sleeper(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

static char pidbuf[32], fdbuf[32], fd2buf[32];

static void *execer(void *arg)
{
	(void)arg;
	usleep(100000);
	char *argv[] = {"thread_execve", "after", pidbuf, fdbuf, fd2buf, NULL};
	execv(GUEST_DIR "/thread_execve", argv);
	SHOW("execv failed: errno=%s", errname(errno));
	_exit(99);
}

static int threads_in_status(void)
{
	char buf[4096];
	if (t_slurp("/proc/self/status", buf, sizeof buf) < 0)
		return -1;
	char *p = strstr(buf, "\nThreads:");
	return p ? atoi(p + 9) : -1;
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "after") == 0) {
		EXPECT_TRUE(getpid() == atoi(argv[2]));
		EXPECT_TRUE(syscall(SYS_gettid) == getpid());
		EXPECT(threads_in_status(), 1);
		int keep = atoi(argv[3]), gone = atoi(argv[4]);
		EXPECT(fcntl(keep, F_GETFD), 0);
		EXPECT_ERR(fcntl(gone, F_GETFD), EBADF);
		/* Fresh signal state: handled signals reset to default. */
		struct sigaction old;
		sigaction(SIGUSR1, NULL, &old);
		EXPECT_TRUE(old.sa_handler == SIG_DFL);
		return t_done();
	}
	signal(SIGUSR1, SIG_IGN);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = (void (*)(int))1 + 0; /* SIG_IGN-like placeholder */
	sa.sa_handler = SIG_IGN;
	/* A caught handler that must be reset by exec. */
	sa.sa_handler = (void (*)(int))spinner;
	sigaction(SIGUSR1, &sa, NULL);
	int keep = EXPECT(open("/etc/passwd", O_RDONLY), 3);
	int gone = EXPECT(open("/etc/passwd", O_RDONLY | O_CLOEXEC), 4);
	snprintf(pidbuf, sizeof pidbuf, "%d", getpid());
	snprintf(fdbuf, sizeof fdbuf, "%d", keep);
	snprintf(fd2buf, sizeof fd2buf, "%d", gone);
	pthread_t t[4];
	pthread_create(&t[0], NULL, spinner, NULL);
	pthread_create(&t[1], NULL, spinner, NULL);
	pthread_create(&t[2], NULL, sleeper, NULL);
	usleep(50000);
	EXPECT(threads_in_status(), 4);
	pthread_create(&t[3], NULL, execer, NULL);
	/* The main thread blocks too; exec must take it down as well. */
	for (;;)
		pause();
}
