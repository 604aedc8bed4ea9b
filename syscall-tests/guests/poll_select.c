/* poll, ppoll, select and pselect6 on pipes: readiness, timeouts (that
 * really wait), POLLHUP/POLLERR/POLLNVAL, a signal mask during ppoll and
 * pselect, and the remaining time written back by select. */
#include "t.h"
#include <poll.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>

static long ms_since(struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

static volatile int hits;
static void on_usr1(int s) { (void)s; hits++; }

int main(void)
{
	int p[2];
	EXPECT(pipe(p), 0);
	struct pollfd fds[2] = {{p[0], POLLIN, 0}, {p[1], POLLOUT, 0}};
	struct timespec t0;

	/* Empty pipe: write end ready, read end not. */
	EXPECT(poll(fds, 2, 0), 1);
	EXPECT(fds[0].revents, 0);
	EXPECT(fds[1].revents, POLLOUT);
	/* Timeout really waits. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	EXPECT(poll(fds, 1, 150), 0);
	long ms = ms_since(&t0);
	EXPECT_TRUE(ms >= 145 && ms < 2000);
	/* Data from a child wakes a poll with no timeout. */
	pid_t c = fork();
	if (c == 0) {
		usleep(100000);
		write(p[1], "z", 1);
		_exit(0);
	}
	EXPECT(poll(fds, 1, -1), 1);
	EXPECT(fds[0].revents, POLLIN);
	waitpid(c, NULL, 0);

	/* ppoll with a timespec. */
	struct timespec ts = {0, 100000000};
	EXPECT(ppoll(fds, 2, &ts, NULL), 2);
	fds[0].revents = 0;
	char ch;
	EXPECT(read(p[0], &ch, 1), 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ts.tv_nsec = 100000000;
	EXPECT(ppoll(fds, 1, &ts, NULL), 0);
	ms = ms_since(&t0);
	EXPECT_TRUE(ms >= 95 && ms < 2000);
	/* ppoll unblocks a signal for its duration. */
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	sigset_t blk, empty;
	sigemptyset(&blk);
	sigemptyset(&empty);
	sigaddset(&blk, SIGUSR1);
	sigprocmask(SIG_BLOCK, &blk, NULL);
	raise(SIGUSR1);
	EXPECT(hits, 0);
	ts.tv_sec = 5;
	EXPECT_ERR(ppoll(fds, 1, &ts, &empty), EINTR);
	EXPECT(hits, 1);

	/* select: readiness and the remaining time. */
	fd_set rf, wf;
	FD_ZERO(&rf);
	FD_ZERO(&wf);
	FD_SET(p[0], &rf);
	FD_SET(p[1], &wf);
	struct timeval tv = {0, 100000};
	clock_gettime(CLOCK_MONOTONIC, &t0);
	EXPECT(select(p[1] + 1, &rf, NULL, NULL, &tv), 0);
	ms = ms_since(&t0);
	EXPECT_TRUE(ms >= 95 && ms < 2000);
	EXPECT_TRUE(tv.tv_sec == 0 && tv.tv_usec == 0);
	FD_SET(p[0], &rf);
	write(p[1], "ab", 2);
	tv.tv_sec = 5;
	tv.tv_usec = 0;
	EXPECT(select(p[1] + 1, &rf, &wf, NULL, &tv), 2);
	EXPECT(FD_ISSET(p[0], &rf), 1);
	EXPECT(FD_ISSET(p[1], &wf), 1);
	EXPECT_TRUE(tv.tv_sec <= 5 && tv.tv_sec >= 4);
	/* pselect with a signal mask. */
	raise(SIGUSR1);
	FD_ZERO(&rf);
	FD_SET(3, &rf);
	char two[2];
	read(p[0], two, 2);
	ts.tv_sec = 5;
	ts.tv_nsec = 0;
	EXPECT_ERR(pselect(p[0] + 1, &rf, NULL, NULL, &ts, &empty), EINTR);
	EXPECT(hits, 2);
	ts.tv_sec = 0;
	ts.tv_nsec = 50000000;
	FD_ZERO(&rf);
	FD_SET(p[0], &rf);
	EXPECT(pselect(p[0] + 1, &rf, NULL, NULL, &ts, NULL), 0);

	/* Hang-up and errors. */
	close(p[1]);
	fds[0].events = POLLIN;
	EXPECT(poll(fds, 1, 0), 1);
	EXPECT(fds[0].revents, POLLHUP);
	FD_ZERO(&rf);
	FD_SET(p[0], &rf);
	tv.tv_sec = 0;
	tv.tv_usec = 0;
	EXPECT(select(p[0] + 1, &rf, NULL, NULL, &tv), 1);
	int q[2];
	EXPECT(pipe(q), 0);
	close(q[0]);
	struct pollfd wfd = {q[1], POLLOUT, 0};
	EXPECT(poll(&wfd, 1, 0), 1);
	EXPECT(wfd.revents, POLLOUT | POLLERR);
	struct pollfd bad[2] = {{50, POLLIN, 0}, {-1, POLLIN, 0}};
	EXPECT(poll(bad, 2, 0), 1);
	EXPECT(bad[0].revents, POLLNVAL);
	EXPECT(bad[1].revents, 0);
	FD_ZERO(&rf);
	FD_SET(50, &rf);
	EXPECT_ERR(select(51, &rf, NULL, NULL, &tv), EBADF);
	EXPECT_ERR(select(-1, NULL, NULL, NULL, &tv), EINVAL);
	tv.tv_usec = -1;
	EXPECT_ERR(select(0, NULL, NULL, NULL, &tv), EINVAL);
	EXPECT_ERR(poll(BADPTR, 1, 0), EFAULT);
	/* poll with no fds is a sleep. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	EXPECT(poll(NULL, 0, 50), 0);
	EXPECT_TRUE(ms_since(&t0) >= 45);
	return t_done();
}
