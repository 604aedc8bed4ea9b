/* Unix stream sockets: what a writer has queued unread counts against
 * the writer's own SO_SNDBUF, not the reader's SO_RCVBUF (Linux's
 * unix_stream_sendmsg; issue 7). Linux's exact numbers include skb
 * overhead, so only robust facts are printed. */
#include "t.h"
#include <poll.h>
#include <sys/socket.h>
#include <time.h>

#define MiB (1L << 20)

static char buf[1 << 20];

/* Nonblocking 1000-byte writes until EAGAIN; the bytes queued. */
static long fill(int w)
{
	long total = 0;
	for (;;) {
		ssize_t n = send(w, buf, 1000, MSG_DONTWAIT);
		if (n < 0) {
			if (errno != EAGAIN)
				printf("send: %s\n", errname(errno));
			return total;
		}
		total += n;
		if (total > 16 * MiB)
			return total;
	}
}

static long drain(int r)
{
	long total = 0;
	for (;;) {
		ssize_t n = recv(r, buf, sizeof buf, MSG_DONTWAIT);
		if (n <= 0)
			return total;
		total += n;
	}
}

static int writable(int fd)
{
	struct pollfd p = { fd, POLLOUT, 0 };
	return poll(&p, 1, 0) == 1 && (p.revents & POLLOUT);
}

static void pair(int sv[2])
{
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
		printf("socketpair: %s\n", errname(errno));
		exit(1);
	}
}

static void setint(int fd, int opt, int v)
{
	EXPECT(setsockopt(fd, SOL_SOCKET, opt, &v, sizeof v), 0);
}

static int getint(int fd, int opt)
{
	int v = 0;
	socklen_t l = sizeof v;
	EXPECT(getsockopt(fd, SOL_SOCKET, opt, &v, &l), 0);
	return v;
}

int main(void)
{
	int sv[2];

	/* Default buffers: the writer stops well before the reader's
	 * SO_RCVBUF worth of 1000-byte writes (each costs more than its
	 * bytes), and a tiny SO_RCVBUF on the reader changes nothing. */
	pair(sv);
	long dflt = fill(sv[0]);
	EXPECT_TRUE(dflt > 0);
	EXPECT_TRUE(dflt < getint(sv[1], SO_RCVBUF));
	EXPECT_TRUE(!writable(sv[0]));
	EXPECT_TRUE(drain(sv[1]) == dflt);
	EXPECT_TRUE(writable(sv[0]));
	close(sv[0]);
	close(sv[1]);

	pair(sv);
	setint(sv[1], SO_RCVBUF, 1);
	long tiny_rcv = fill(sv[0]);
	EXPECT_TRUE(tiny_rcv > 16 * 1024);
	close(sv[0]);
	close(sv[1]);

	/* A small SO_SNDBUF on the writer: EAGAIN well before 1 MiB, even
	 * with a large reader buffer; a large write goes in part. */
	pair(sv);
	setint(sv[0], SO_SNDBUF, 4096);
	setint(sv[1], SO_RCVBUF, 4 * MiB);
	long small = fill(sv[0]);
	EXPECT_TRUE(small > 0 && small < 64 * 1024);
	EXPECT_TRUE(drain(sv[1]) == small);
	ssize_t part = send(sv[0], buf, MiB, MSG_DONTWAIT);
	EXPECT_TRUE(part > 0 && part < 64 * 1024);
	EXPECT_ERR(send(sv[0], buf, 1, MSG_DONTWAIT), EAGAIN);
	EXPECT_TRUE(drain(sv[1]) == part);

	/* A blocking writer with the small buffer waits for the reader and
	 * gets everything through. */
	pid_t pid = fork();
	if (pid == 0) {
		long left = 512 * 1024;
		while (left > 0) {
			ssize_t n = write(sv[0], buf, left > MiB ? MiB : left);
			if (n <= 0)
				_exit(2);
			left -= n;
		}
		_exit(0);
	}
	long got = 0;
	while (got < 512 * 1024) {
		ssize_t n = read(sv[1], buf, sizeof buf);
		if (n <= 0)
			break;
		got += n;
	}
	int st;
	EXPECT_TRUE(waitpid(pid, &st, 0) == pid);
	EXPECT_TRUE(got == 512 * 1024);
	EXPECT(WEXITSTATUS(st), 0);
	close(sv[0]);
	close(sv[1]);

	/* A large SO_SNDBUF on the writer, a tiny SO_RCVBUF on the reader:
	 * more queues than with the small one, and more than the default. */
	pair(sv);
	setint(sv[0], SO_SNDBUF, 2 * MiB);
	setint(sv[1], SO_RCVBUF, 1);
	long large = fill(sv[0]);
	EXPECT_TRUE(large > small);
	EXPECT_TRUE(large > dflt);
	EXPECT_TRUE(large > MiB);
	EXPECT_TRUE(drain(sv[1]) == large);
	close(sv[0]);
	close(sv[1]);

	/* The peer shutting its reading side wakes a writer blocked for
	 * room: EPIPE. */
	pair(sv);
	setint(sv[0], SO_SNDBUF, 4096);
	fill(sv[0]);
	pid = fork();
	if (pid == 0) {
		struct timespec d = { 0, 100 * 1000000L };
		nanosleep(&d, NULL);
		shutdown(sv[1], SHUT_RD);
		_exit(0);
	}
	signal(SIGPIPE, SIG_IGN);
	EXPECT_ERR(write(sv[0], buf, 1000), EPIPE);
	EXPECT_TRUE(waitpid(pid, &st, 0) == pid);
	close(sv[0]);
	close(sv[1]);
	return t_done();
}
