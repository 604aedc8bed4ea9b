/* Edge-triggered epoll on TCP and UDP sockets: every arrival is an edge,
 * as each of Linux's sk_data_ready callbacks wakes the epoll item: another
 * connection or more data after the guest drained the socket without an
 * epoll_wait in between (the Go netpoller's pattern: read or accept until
 * EAGAIN, then wait), an arrival while some were waiting already, and one
 * that wakes a waiter blocked in epoll_wait. */
#include "t.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

static struct sockaddr_in addr;

static int connect_to(int type)
{
	int c = socket(AF_INET, type, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&addr, sizeof addr) < 0)
		return -1;
	return c;
}

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int main(void)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLET}, out[4];
	char b[16];
	int ep = EXPECT(epoll_create1(0), 3);
	int l = EXPECT(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), 4);
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	EXPECT(bind(l, (struct sockaddr *)&addr, sizeof addr), 0);
	socklen_t len = sizeof addr;
	EXPECT(getsockname(l, (struct sockaddr *)&addr, &len), 0);
	EXPECT(listen(l, 16), 0);
	ev.data.u64 = 1;
	EXPECT(epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev), 0);

	/* A connection: one event. */
	int c1 = EXPECT_OK(connect_to(SOCK_STREAM));
	EXPECT(epoll_wait(ep, out, 4, 2000), 1);
	EXPECT(epoll_wait(ep, out, 4, 0), 0);
	/* Drained without an epoll_wait in between, then another: an event. */
	int s1 = EXPECT_OK(accept4(l, NULL, NULL, SOCK_NONBLOCK));
	EXPECT_ERR(accept4(l, NULL, NULL, SOCK_NONBLOCK), EAGAIN);
	int c2 = EXPECT_OK(connect_to(SOCK_STREAM));
	EXPECT(epoll_wait(ep, out, 4, 2000), 1);
	EXPECT(epoll_wait(ep, out, 4, 0), 0);
	/* One still waiting to be accepted, and another comes: an event. */
	int c3 = EXPECT_OK(connect_to(SOCK_STREAM));
	EXPECT(epoll_wait(ep, out, 4, 2000), 1);
	EXPECT(epoll_wait(ep, out, 4, 0), 0);
	/* A waiter blocked in epoll_wait wakes up for another arrival. */
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		usleep(100000);
		int c = connect_to(SOCK_STREAM);
		usleep(100000);
		_exit(c < 0);
	}
	long t0 = now_ms();
	EXPECT(epoll_wait(ep, out, 4, 5000), 1);
	EXPECT_TRUE(now_ms() - t0 < 4000);
	int st;
	EXPECT_TRUE(waitpid(pid, &st, 0) == pid && st == 0);
	int s2 = EXPECT_OK(accept4(l, NULL, NULL, SOCK_NONBLOCK));
	int s3 = EXPECT_OK(accept4(l, NULL, NULL, SOCK_NONBLOCK));
	int s4 = EXPECT_OK(accept4(l, NULL, NULL, SOCK_NONBLOCK));
	EXPECT_ERR(accept4(l, NULL, NULL, SOCK_NONBLOCK), EAGAIN);

	/* Stream data: the same amount again after a drain is an edge, and
	 * so is more data while some is unread. */
	ev.data.u64 = 2;
	EXPECT(epoll_ctl(ep, EPOLL_CTL_ADD, s1, &ev), 0);
	EXPECT(epoll_wait(ep, out, 4, 0), 0);
	EXPECT(write(c1, "abc", 3), 3);
	EXPECT(epoll_wait(ep, out, 4, 2000), 1);
	EXPECT(out[0].data.u64, 2);
	EXPECT(read(s1, b, sizeof b), 3);
	EXPECT_ERR(read(s1, b, sizeof b), EAGAIN);
	EXPECT(write(c1, "abc", 3), 3);
	EXPECT(epoll_wait(ep, out, 4, 2000), 1);
	EXPECT(epoll_wait(ep, out, 4, 0), 0);
	EXPECT(write(c1, "de", 2), 2);
	EXPECT(epoll_wait(ep, out, 4, 2000), 1);
	EXPECT(epoll_wait(ep, out, 4, 0), 0);
	EXPECT(read(s1, b, sizeof b), 5);

	/* UDP: a datagram of the same size after a drain is an edge. */
	int u = EXPECT_OK(socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0));
	addr.sin_port = 0;
	EXPECT(bind(u, (struct sockaddr *)&addr, sizeof addr), 0);
	len = sizeof addr;
	EXPECT(getsockname(u, (struct sockaddr *)&addr, &len), 0);
	ev.data.u64 = 3;
	EXPECT(epoll_ctl(ep, EPOLL_CTL_ADD, u, &ev), 0);
	int uc = EXPECT_OK(connect_to(SOCK_DGRAM));
	EXPECT(send(uc, "xyz", 3, 0), 3);
	EXPECT(epoll_wait(ep, out, 4, 2000), 1);
	EXPECT(out[0].data.u64, 3);
	EXPECT(recv(u, b, sizeof b, 0), 3);
	EXPECT_ERR(recv(u, b, sizeof b, 0), EAGAIN);
	EXPECT(send(uc, "xyz", 3, 0), 3);
	EXPECT(epoll_wait(ep, out, 4, 2000), 1);
	EXPECT(epoll_wait(ep, out, 4, 0), 0);
	EXPECT(send(uc, "uv", 2, 0), 2);
	EXPECT(epoll_wait(ep, out, 4, 2000), 1);
	EXPECT(epoll_wait(ep, out, 4, 0), 0);

	close(c2);
	close(c3);
	close(s2);
	close(s3);
	close(s4);
	return t_done();
}
