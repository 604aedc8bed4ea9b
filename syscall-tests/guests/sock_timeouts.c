/* SO_RCVTIMEO and SO_SNDTIMEO on Unix stream and datagram sockets, TCP
 * loopback and UDP: getsockopt round trips (jiffy rounding, EDOM, EINVAL,
 * a negative tv_sec meaning "do not wait", the _NEW variants), blocking
 * read/recv/recvfrom/recvmsg/accept ending in EAGAIN after the receive
 * timeout, MSG_WAITALL returning the partial count, write/send ending in
 * EAGAIN or a partial count after the send timeout, an accepted TCP
 * socket inheriting the listener's timeouts, connect giving up (Unix:
 * EAGAIN, TCP: EINPROGRESS) when the backlog is full, and a signal ending
 * a wait with a timeout in EINTR even under SA_RESTART (signal(7)) while
 * a wait without one is restarted. Times are printed only as coarse
 * yes/no facts. */
#include "t.h"
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <stddef.h>
#include <time.h>

#ifndef SO_RCVTIMEO_NEW
#define SO_RCVTIMEO_NEW 66
#define SO_SNDTIMEO_NEW 67
#endif

static double t0;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void start(void)
{
	t0 = now();
}

/* The wait lasted about the 0.3 s timeout: printed as a fact. */
static void waited(const char *what)
{
	double el = now() - t0;
	int ok = el >= 0.2 && el < 2.0;
	printf("%s: elapsed >= 0.2s and < 2s: %s\n", what, ok ? "yes" : "no");
	if (!ok)
		t_fail("a wait of about 0.3s");
}

/* The call did not wait (for the timeout). */
static void before(const char *what, double limit)
{
	double el = now() - t0;
	int ok = el < limit;
	printf("%s: elapsed < %gs: %s\n", what, limit, ok ? "yes" : "no");
	if (!ok)
		t_fail("no wait");
}

static void prompt(const char *what)
{
	before(what, 0.15);
}

static int set_tv(int fd, int opt, long sec, long usec)
{
	struct timeval tv = { .tv_sec = sec, .tv_usec = usec };
	return setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof tv);
}

static void show_tv(const char *what, int fd, int opt)
{
	struct timeval tv = { -7, -7 };
	socklen_t len = sizeof tv;
	int r = getsockopt(fd, SOL_SOCKET, opt, &tv, &len);
	if (r < 0)
		printf("%s: getsockopt errno=%s\n", what, errname(errno));
	else
		printf("%s: len=%u sec=%ld usec=%ld\n", what, len, (long)tv.tv_sec, (long)tv.tv_usec);
}

/* Round trips on one socket of any family. */
static void options(const char *fam, int fd)
{
	printf("-- options on %s\n", fam);
	show_tv("default rcv", fd, SO_RCVTIMEO);
	show_tv("default snd", fd, SO_SNDTIMEO);
	EXPECT(set_tv(fd, SO_RCVTIMEO, 1, 500000), 0);
	show_tv("1.5s rcv", fd, SO_RCVTIMEO);
	show_tv("1.5s rcv as _NEW", fd, SO_RCVTIMEO_NEW);
	EXPECT(set_tv(fd, SO_SNDTIMEO, 0, 250000), 0);
	show_tv("0.25s snd", fd, SO_SNDTIMEO);
	show_tv("rcv untouched", fd, SO_RCVTIMEO);
	/* 1 µs rounds up to one jiffy, whose length is the kernel's HZ. */
	EXPECT(set_tv(fd, SO_RCVTIMEO, 0, 1), 0);
	struct timeval tv;
	socklen_t len = sizeof tv;
	EXPECT(getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &len), 0);
	EXPECT_TRUE(tv.tv_sec == 0 && tv.tv_usec >= 1000 && tv.tv_usec <= 10000);
	EXPECT_ERR(set_tv(fd, SO_RCVTIMEO, 1, 1000000), EDOM);
	EXPECT_ERR(set_tv(fd, SO_RCVTIMEO, 1, -1), EDOM);
	EXPECT_ERR(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, 8), EINVAL);
	EXPECT(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, 24), 0);
	/* A short getsockopt buffer gets the first bytes. */
	long first = -1;
	len = sizeof first;
	EXPECT(getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &first, &len), 0);
	printf("short get: len=%u sec=%ld\n", len, first);
	/* The 64-bit variants take the same struct on x86-64. */
	long long nt[2] = { 2, 4000 };
	EXPECT(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO_NEW, nt, sizeof nt), 0);
	show_tv("_NEW set, old get", fd, SO_SNDTIMEO);
	/* Zero is "no timeout"; a negative tv_sec is accepted and reads
	 * back as zero. */
	EXPECT(set_tv(fd, SO_SNDTIMEO, 0, 0), 0);
	show_tv("zero snd", fd, SO_SNDTIMEO);
	EXPECT(set_tv(fd, SO_RCVTIMEO, -1, 0), 0);
	show_tv("negative rcv", fd, SO_RCVTIMEO);
	EXPECT(set_tv(fd, SO_RCVTIMEO, 0, 0), 0);
}

static void receives(const char *what, int fd)
{
	char buf[100];
	printf("-- receive timeouts on %s\n", what);
	EXPECT(set_tv(fd, SO_RCVTIMEO, 0, 300000), 0);
	start();
	EXPECT_ERR(read(fd, buf, sizeof buf), EAGAIN);
	waited("read");
	start();
	EXPECT_ERR(recv(fd, buf, sizeof buf, 0), EAGAIN);
	waited("recv");
	start();
	EXPECT_ERR(recvfrom(fd, buf, sizeof buf, 0, NULL, NULL), EAGAIN);
	waited("recvfrom");
	struct iovec iov = { buf, sizeof buf };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	start();
	EXPECT_ERR(recvmsg(fd, &m, 0), EAGAIN);
	waited("recvmsg");
	/* MSG_DONTWAIT still does not wait. */
	start();
	EXPECT_ERR(recv(fd, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
	prompt("recv MSG_DONTWAIT");
	/* A negative tv_sec: no wait at all. */
	EXPECT(set_tv(fd, SO_RCVTIMEO, -1, 0), 0);
	start();
	EXPECT_ERR(recv(fd, buf, sizeof buf, 0), EAGAIN);
	prompt("recv with negative timeout");
	EXPECT(set_tv(fd, SO_RCVTIMEO, 0, 300000), 0);
}

/* `fd` has a 0.3 s receive timeout and its peer `peer` sends 5 bytes:
 * MSG_WAITALL returns them when the time is up; a plain read returns
 * what is there at once. */
static void partial_receive(int fd, int peer)
{
	char buf[100];
	EXPECT(send(peer, "hello", 5, 0), 5);
	usleep(50000);
	start();
	EXPECT(recv(fd, buf, sizeof buf, MSG_WAITALL), 5);
	waited("recv MSG_WAITALL partial");
	EXPECT(send(peer, "again", 5, 0), 5);
	usleep(50000);
	start();
	EXPECT(read(fd, buf, sizeof buf), 5);
	prompt("read what is there");
}

/* Fills `fd`'s way to its peer (which does not read) without waiting. */
static void fill(int fd, size_t piece)
{
	static char junk[65536];
	while (send(fd, junk, piece, MSG_DONTWAIT) > 0)
		;
}

/* With a 0.3 s send timeout on a connected stream whose peer does not
 * read, a large write sends part of it and returns the count. */
static void partial_send(const char *what, int fd)
{
	static char big[8 << 20];
	EXPECT(set_tv(fd, SO_SNDTIMEO, 0, 300000), 0);
	start();
	errno = 0;
	long n = write(fd, big, sizeof big);
	printf("%s: large write is partial: %s\n", what,
	       n > 0 && n < (long)sizeof big ? "yes" : "no");
	if (!(n > 0 && n < (long)sizeof big))
		t_fail("a partial count");
	waited("large write");
	/* Now full: nothing more goes, EAGAIN when the time is up. */
	fill(fd, 4096);
	fill(fd, 1);
	start();
	errno = 0;
	n = send(fd, big, 4096, 0);
	printf("%s: send on a full socket: %s\n", what,
	       n == -1 && errno == EAGAIN ? "EAGAIN" : n > 0 ? "partial" : errname(errno));
	waited("send on a full socket");
}

static void unix_stream(void)
{
	int sv[2];
	EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	options("unix stream", sv[0]);
	receives("unix stream", sv[0]);
	partial_receive(sv[0], sv[1]);
	partial_send("unix stream", sv[0]);
	close(sv[0]);
	close(sv[1]);

	printf("-- unix accept and connect\n");
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	memcpy(a.sun_path, "\0sock_timeouts", 14);
	socklen_t alen = offsetof(struct sockaddr_un, sun_path) + 14;
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	EXPECT(bind(l, (struct sockaddr *)&a, alen), 0);
	EXPECT(listen(l, 0), 0);
	EXPECT(set_tv(l, SO_RCVTIMEO, 0, 300000), 0);
	start();
	EXPECT_ERR(accept(l, NULL, NULL), EAGAIN);
	waited("unix accept");
	/* Backlog 0 holds one connection; the next waits for room, for at
	 * most SO_SNDTIMEO, then fails with EAGAIN. */
	int c1 = socket(AF_UNIX, SOCK_STREAM, 0);
	EXPECT(connect(c1, (struct sockaddr *)&a, alen), 0);
	int c2 = socket(AF_UNIX, SOCK_STREAM, 0);
	EXPECT(set_tv(c2, SO_SNDTIMEO, 0, 300000), 0);
	start();
	EXPECT_ERR(connect(c2, (struct sockaddr *)&a, alen), EAGAIN);
	waited("unix connect");
	int s = accept(l, NULL, NULL);
	EXPECT_TRUE(s >= 0);
	/* Unix sockets made by accept start without the listener's. */
	show_tv("unix accepted rcv", s, SO_RCVTIMEO);
	close(s);
	close(c1);
	close(c2);
	close(l);
}

static void unix_dgram(void)
{
	int sv[2];
	EXPECT(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
	options("unix dgram", sv[0]);
	receives("unix dgram", sv[0]);
	/* The peer does not read: once the queue is full, a blocking send
	 * gives up after SO_SNDTIMEO with EAGAIN. */
	EXPECT(set_tv(sv[0], SO_SNDTIMEO, 0, 300000), 0);
	fill(sv[0], 1000);
	static char msg[1000];
	start();
	EXPECT_ERR(send(sv[0], msg, sizeof msg, 0), EAGAIN);
	waited("unix dgram send on a full queue");
	close(sv[0]);
	close(sv[1]);
}

static int tcp_listener(struct sockaddr_in *a, int backlog)
{
	socklen_t alen = sizeof *a;
	int l = socket(AF_INET, SOCK_STREAM, 0);
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a->sin_port = 0;
	if (bind(l, (struct sockaddr *)a, sizeof *a) < 0 || listen(l, backlog) < 0 ||
	    getsockname(l, (struct sockaddr *)a, &alen) < 0)
		return -1;
	return l;
}

static void tcp(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	options("tcp", fd);
	close(fd);

	printf("-- tcp accept\n");
	struct sockaddr_in a;
	int l = tcp_listener(&a, 8);
	EXPECT_TRUE(l >= 0);
	EXPECT(set_tv(l, SO_RCVTIMEO, 0, 300000), 0);
	EXPECT(set_tv(l, SO_SNDTIMEO, 1, 500000), 0);
	start();
	EXPECT_ERR(accept(l, NULL, NULL), EAGAIN);
	waited("tcp accept");
	int c = socket(AF_INET, SOCK_STREAM, 0);
	EXPECT(connect(c, (struct sockaddr *)&a, sizeof a), 0);
	int s = accept(l, NULL, NULL);
	EXPECT_TRUE(s >= 0);
	/* An accepted TCP socket inherits the listener's timeouts. */
	show_tv("tcp accepted rcv", s, SO_RCVTIMEO);
	show_tv("tcp accepted snd", s, SO_SNDTIMEO);
	EXPECT(set_tv(s, SO_SNDTIMEO, 0, 0), 0);
	receives("tcp", s);
	partial_receive(s, c);
	partial_send("tcp", c);
	close(c);
	close(s);
	close(l);

	/* Backlog 0 holds one connection; the next one's SYNs are dropped,
	 * so its connect gives up after SO_SNDTIMEO with EINPROGRESS. */
	printf("-- tcp connect\n");
	l = tcp_listener(&a, 0);
	EXPECT_TRUE(l >= 0);
	int c1 = socket(AF_INET, SOCK_STREAM, 0);
	EXPECT(connect(c1, (struct sockaddr *)&a, sizeof a), 0);
	usleep(50000);
	int c2 = socket(AF_INET, SOCK_STREAM, 0);
	EXPECT(set_tv(c2, SO_SNDTIMEO, 0, 300000), 0);
	start();
	EXPECT_ERR(connect(c2, (struct sockaddr *)&a, sizeof a), EINPROGRESS);
	waited("tcp connect");
	/* Again: the connect under way is waited for again, then EALREADY. */
	start();
	EXPECT_ERR(connect(c2, (struct sockaddr *)&a, sizeof a), EALREADY);
	waited("tcp connect again");
	close(c2);
	close(c1);
	close(l);
}

static void udp(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	options("udp", fd);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	EXPECT(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	receives("udp", fd);
	close(fd);
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* SIGALRM (SA_RESTART) after 0.1 s during a receive on `fd`. */
static void arm(void)
{
	struct itimerval it = { .it_value = { 0, 100000 } };
	setitimer(ITIMER_REAL, &it, NULL);
}

static void signals(void)
{
	printf("-- signals\n");
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	sigaction(SIGALRM, &sa, NULL);
	char buf[16];
	int sv[2];
	EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	/* With a timeout, the signal ends the wait: EINTR, not restarted. */
	EXPECT(set_tv(sv[0], SO_RCVTIMEO, 1, 0), 0);
	arm();
	start();
	EXPECT_ERR(recv(sv[0], buf, sizeof buf, 0), EINTR);
	before("unix recv interrupted", 0.9);
	/* Without one, SA_RESTART restarts it and the data a child sends
	 * later arrives. */
	EXPECT(set_tv(sv[0], SO_RCVTIMEO, 0, 0), 0);
	pid_t pid = fork();
	if (pid == 0) {
		usleep(300000);
		send(sv[1], "late", 4, 0);
		_exit(0);
	}
	arm();
	EXPECT(recv(sv[0], buf, sizeof buf, 0), 4);
	waitpid(pid, NULL, 0);
	close(sv[0]);
	close(sv[1]);

	/* TCP (the netstack in the sandbox) the same way. */
	struct sockaddr_in a;
	int l = tcp_listener(&a, 8);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	EXPECT(connect(c, (struct sockaddr *)&a, sizeof a), 0);
	int s = accept(l, NULL, NULL);
	EXPECT(set_tv(s, SO_RCVTIMEO, 1, 0), 0);
	arm();
	start();
	EXPECT_ERR(recv(s, buf, sizeof buf, 0), EINTR);
	before("tcp recv interrupted", 0.9);
	EXPECT(set_tv(l, SO_RCVTIMEO, 1, 0), 0);
	arm();
	start();
	EXPECT_ERR(accept(l, NULL, NULL), EINTR);
	before("tcp accept interrupted", 0.9);
	close(c);
	close(s);
	close(l);
}

int main(void)
{
	unix_stream();
	unix_dgram();
	tcp();
	udp();
	signals();
	return t_done();
}
