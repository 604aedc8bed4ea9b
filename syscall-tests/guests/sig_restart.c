/* A blocking pipe read interrupted by a signal: EINTR without SA_RESTART,
 * transparently restarted with it (the data written later still arrives). */
#include "t.h"
#include <sys/time.h>
#include <sys/wait.h>

static volatile int hits;
static void on_alrm(int sig) { (void)sig; hits++; }

static void arm(long usec)
{
	struct itimerval it = {{0, 0}, {0, usec}};
	setitimer(ITIMER_REAL, &it, NULL);
}

int main(void)
{
	int p[2];
	char buf[16];
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alrm;

	/* No SA_RESTART: read fails with EINTR. */
	EXPECT(pipe(p), 0);
	sa.sa_flags = 0;
	EXPECT(sigaction(SIGALRM, &sa, NULL), 0);
	arm(100000);
	EXPECT_ERR(read(p[0], buf, sizeof buf), EINTR);
	EXPECT(hits, 1);
	/* alarm() itself, 1 s resolution. */
	alarm(1);
	EXPECT_ERR(read(p[0], buf, sizeof buf), EINTR);
	EXPECT(hits, 2);

	/* SA_RESTART: the handler runs, the read goes on and gets the data a
	 * child writes later. */
	sa.sa_flags = SA_RESTART;
	EXPECT(sigaction(SIGALRM, &sa, NULL), 0);
	pid_t c = fork();
	if (c == 0) {
		usleep(400000);
		write(p[1], "late", 4);
		_exit(0);
	}
	arm(100000);
	EXPECT(read(p[0], buf, sizeof buf), 4);
	EXPECT(hits, 3);
	EXPECT(memcmp(buf, "late", 4), 0);
	waitpid(c, NULL, 0);

	/* SA_RESTART does not restart nanosleep-like calls with timeouts...
	 * but a blocking wait4 is restarted. */
	c = fork();
	if (c == 0) {
		usleep(300000);
		_exit(9);
	}
	arm(100000);
	int st;
	EXPECT_TRUE(waitpid(c, &st, 0) == c);
	EXPECT(WEXITSTATUS(st), 9);
	EXPECT(hits, 4);
	/* Without SA_RESTART wait4 is interrupted too. */
	sa.sa_flags = 0;
	EXPECT(sigaction(SIGALRM, &sa, NULL), 0);
	c = fork();
	if (c == 0) {
		usleep(300000);
		_exit(9);
	}
	arm(100000);
	EXPECT_ERR(waitpid(c, &st, 0), EINTR);
	EXPECT(hits, 5);
	EXPECT_TRUE(waitpid(c, &st, 0) == c);
	/* A select is never restarted, even with SA_RESTART. */
	sa.sa_flags = SA_RESTART;
	EXPECT(sigaction(SIGALRM, &sa, NULL), 0);
	fd_set rf;
	FD_ZERO(&rf);
	FD_SET(p[0], &rf);
	arm(100000);
	EXPECT_ERR(select(p[0] + 1, &rf, NULL, NULL, NULL), EINTR);
	EXPECT(hits, 6);
	return t_done();
}
