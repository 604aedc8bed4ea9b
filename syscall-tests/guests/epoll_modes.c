/* epoll on pipes: level-triggered reports again while data remains,
 * edge-triggered only on new data, EPOLLONESHOT disarms until EPOLL_CTL_MOD,
 * epoll_pwait with a mask, timeouts, and ctl errors. */
#include "t.h"
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>

static volatile int hits;
static void on_usr1(int s) { (void)s; hits++; }

int main(void)
{
	int ep = EXPECT(epoll_create1(EPOLL_CLOEXEC), 3);
	EXPECT(fcntl(ep, F_GETFD), FD_CLOEXEC);
	int p[2];
	EXPECT(pipe(p), 0);
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0x1234};
	struct epoll_event out[4];
	EXPECT(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev), 0);
	EXPECT_ERR(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev), EEXIST);

	/* Nothing yet: timeout. */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	EXPECT(epoll_wait(ep, out, 4, 100), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	EXPECT_TRUE(ms >= 95 && ms < 2000);

	/* Level-triggered: reported each time while unread. */
	write(p[1], "abcd", 4);
	EXPECT(epoll_wait(ep, out, 4, 0), 1);
	EXPECT(out[0].events, EPOLLIN);
	EXPECT(out[0].data.u64, 0x1234);
	EXPECT(epoll_wait(ep, out, 4, 0), 1);
	char b[8];
	EXPECT(read(p[0], b, 2), 2);
	EXPECT(epoll_wait(ep, out, 4, 0), 1);
	EXPECT(read(p[0], b, 2), 2);
	EXPECT(epoll_wait(ep, out, 4, 0), 0);

	/* Edge-triggered: once per new arrival. */
	ev.events = EPOLLIN | EPOLLET;
	EXPECT(epoll_ctl(ep, EPOLL_CTL_MOD, p[0], &ev), 0);
	write(p[1], "xy", 2);
	EXPECT(epoll_wait(ep, out, 4, 0), 1);
	EXPECT(epoll_wait(ep, out, 4, 0), 0);
	EXPECT(read(p[0], b, 1), 1);
	EXPECT(epoll_wait(ep, out, 4, 0), 0);
	write(p[1], "z", 1);
	EXPECT(epoll_wait(ep, out, 4, 0), 1);
	EXPECT(read(p[0], b, 8), 2);

	/* One-shot: reported once, then disarmed even for new data, until
	 * rearmed by MOD. */
	ev.events = EPOLLIN | EPOLLONESHOT;
	EXPECT(epoll_ctl(ep, EPOLL_CTL_MOD, p[0], &ev), 0);
	write(p[1], "1", 1);
	EXPECT(epoll_wait(ep, out, 4, 0), 1);
	EXPECT(epoll_wait(ep, out, 4, 0), 0);
	write(p[1], "2", 1);
	EXPECT(epoll_wait(ep, out, 4, 0), 0);
	EXPECT(epoll_ctl(ep, EPOLL_CTL_MOD, p[0], &ev), 0);
	EXPECT(epoll_wait(ep, out, 4, 0), 1);
	EXPECT(read(p[0], b, 8), 2);

	/* Several fds; maxevents limits the batch. */
	int q[2];
	EXPECT(pipe(q), 0);
	ev.events = EPOLLOUT;
	ev.data.u64 = 7;
	EXPECT(epoll_ctl(ep, EPOLL_CTL_ADD, q[1], &ev), 0);
	ev.events = EPOLLIN;
	ev.data.u64 = 0x1234;
	EXPECT(epoll_ctl(ep, EPOLL_CTL_MOD, p[0], &ev), 0);
	write(p[1], "k", 1);
	EXPECT(epoll_wait(ep, out, 4, 0), 2);
	EXPECT(epoll_wait(ep, out, 1, 0), 1);
	EXPECT(read(p[0], b, 8), 1);
	EXPECT(epoll_wait(ep, out, 4, 0), 1);
	EXPECT(out[0].data.u64, 7);
	EXPECT(epoll_ctl(ep, EPOLL_CTL_DEL, q[1], NULL), 0);
	EXPECT_ERR(epoll_ctl(ep, EPOLL_CTL_DEL, q[1], NULL), ENOENT);

	/* A blocking wait is woken by a write from a child. */
	pid_t c = fork();
	if (c == 0) {
		usleep(100000);
		write(p[1], "w", 1);
		_exit(0);
	}
	EXPECT(epoll_wait(ep, out, 4, 5000), 1);
	EXPECT(read(p[0], b, 8), 1);
	waitpid(c, NULL, 0);

	/* Hang-up: EPOLLHUP always reported. */
	close(q[1]);
	ev.events = EPOLLIN;
	ev.data.u64 = 9;
	EXPECT(epoll_ctl(ep, EPOLL_CTL_ADD, q[0], &ev), 0);
	EXPECT(epoll_wait(ep, out, 4, 0), 1);
	EXPECT(out[0].events, EPOLLHUP);

	/* epoll_pwait with a mask that lets a blocked signal in. */
	EXPECT(epoll_ctl(ep, EPOLL_CTL_DEL, q[0], NULL), 0);
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
	EXPECT_ERR(epoll_pwait(ep, out, 4, 5000, &empty), EINTR);
	EXPECT(hits, 1);

	/* Nested epoll: the inner one is readable when it has events. */
	int ep2 = epoll_create1(0);
	ev.events = EPOLLIN;
	EXPECT(epoll_ctl(ep2, EPOLL_CTL_ADD, ep, &ev), 0);
	EXPECT(epoll_wait(ep2, out, 4, 0), 0);
	write(p[1], "n", 1);
	EXPECT(epoll_wait(ep2, out, 4, 0), 1);
	EXPECT_ERR(epoll_ctl(ep, EPOLL_CTL_ADD, ep2, &ev), ELOOP);

	/* Errors. */
	EXPECT_ERR(epoll_ctl(ep, EPOLL_CTL_ADD, ep, &ev), EINVAL);
	EXPECT_ERR(epoll_ctl(ep, EPOLL_CTL_ADD, 77, &ev), EBADF);
	int f = open("/etc/passwd", O_RDONLY);
	EXPECT_ERR(epoll_ctl(ep, EPOLL_CTL_ADD, f, &ev), EPERM);
	EXPECT_ERR(epoll_ctl(p[0], EPOLL_CTL_ADD, p[1], &ev), EINVAL);
	EXPECT_ERR(epoll_wait(ep, out, 0, 0), EINVAL);
	EXPECT_ERR(epoll_create1(0x1234), EINVAL);
	EXPECT_ERR(epoll_create(0), EINVAL);
	return t_done();
}
