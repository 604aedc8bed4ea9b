/* Signal-driven I/O beyond data arriving (sigio.c): hang-ups, room to write
 * again, errors and connections, on pipes, Unix and TCP/UDP sockets, ptys,
 * netlink and inotify, with the si_code (POLL_IN 1, POLL_OUT 2, POLL_ERR 4,
 * POLL_HUP 6), si_band and si_fd Linux gives them (fcntl(2) F_SETSIG; the
 * kernel's kill_fasync() callers). Every object signals SIGRTMIN+2 to this
 * process; signals are blocked and collected with sigtimedwait, waiting up
 * to a few seconds where Linux finishes the work after the call returns
 * (TCP on loopback, the pty's line discipline). */
#include "t.h"
#include <arpa/inet.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <time.h>

#ifndef F_SETSIG
#define F_SETSIG 10
#endif

static sigset_t set;
static int sig;

static const char *code_name(int code)
{
	switch (code) {
	case POLL_IN: return "POLL_IN";
	case POLL_OUT: return "POLL_OUT";
	case POLL_MSG: return "POLL_MSG";
	case POLL_ERR: return "POLL_ERR";
	case POLL_PRI: return "POLL_PRI";
	case POLL_HUP: return "POLL_HUP";
	default: return "other";
	}
}

/* Waits up to `ms` for the signal; prints what came. */
static int got(const char *what, int ms, int fd)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	siginfo_t si;
	memset(&si, 0, sizeof si);
	int s = sigtimedwait(&set, &si, &ts);
	if (s < 0) {
		printf("%s: none (%s)\n", what, errname(errno));
		return 0;
	}
	printf("%s: %s band=%#lx fd_matches=%d\n", what, code_name(si.si_code),
	       (long)si.si_band, si.si_fd == fd);
	return si.si_code;
}

/* Forgets whatever signals are pending (where Linux's count depends on the
 * host, such as a netlink dump of the host's interfaces). */
static void flush(void)
{
	struct timespec ts = { 0, 0 };
	while (sigtimedwait(&set, NULL, &ts) > 0)
		;
}

/* O_ASYNC with this process as the owner and the signal `sig`. */
static void async_on(int fd)
{
	int one = 1;
	if (fcntl(fd, F_SETOWN, getpid()) || fcntl(fd, F_SETSIG, sig) ||
	    ioctl(fd, FIOASYNC, &one)) {
		printf("async_on: %s\n", errname(errno));
		exit(125);
	}
}

static void nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* Writes until the object is full. */
static void fill(int fd)
{
	static char buf[65536];
	for (;;) {
		ssize_t n = write(fd, buf, sizeof buf);
		if (n < 0) {
			if (errno != EAGAIN)
				printf("fill: %s\n", errname(errno));
			return;
		}
	}
}

/* Reads what `from` holds until `fd` is signalled (or 5 s pass). */
static void drain_until_signal(const char *what, int from, int fd)
{
	static char buf[65536];
	for (int i = 0; i < 100; i++) {
		while (read(from, buf, sizeof buf) > 0)
			;
		struct timespec ts = { 0, 50 * 1000000L };
		siginfo_t si;
		memset(&si, 0, sizeof si);
		if (sigtimedwait(&set, &si, &ts) > 0) {
			printf("%s: %s band=%#lx fd_matches=%d\n", what, code_name(si.si_code),
			       (long)si.si_band, si.si_fd == fd);
			return;
		}
	}
	printf("%s: none\n", what);
}

static struct sockaddr_in loopback(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

/* A listener on 127.0.0.1 and its address. */
static int listener(struct sockaddr_in *addr)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	*addr = loopback(0);
	socklen_t len = sizeof *addr;
	if (bind(l, (struct sockaddr *)addr, len) || listen(l, 16) ||
	    getsockname(l, (struct sockaddr *)addr, &len))
		exit(125);
	return l;
}

/* A connected TCP pair through `l`: *c the client, returns the server side. */
static int tcp_pair(int l, struct sockaddr_in *addr, int *c)
{
	*c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(*c, (struct sockaddr *)addr, sizeof *addr))
		exit(125);
	int a = accept(l, NULL, NULL);
	if (a < 0)
		exit(125);
	return a;
}

int main(void)
{
	setpgid(0, 0);
	sig = SIGRTMIN + 2;
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_BLOCK, &set, NULL);
	char b[64];

	/* Pipes: the last writer's close is POLL_IN for the readers, the
	 * last reader's POLL_OUT for the writers (pipe_release). */
	int p[2];
	EXPECT(pipe(p), 0);
	async_on(p[0]);
	close(p[1]);
	got("pipe: last writer closed", 0, p[0]);
	got("pipe: nothing more", 0, p[0]);
	close(p[0]);
	EXPECT(pipe(p), 0);
	async_on(p[1]);
	close(p[0]);
	got("pipe: last reader closed", 0, p[1]);
	close(p[1]);

	/* Unix stream sockets: the peer's shutdown and close. */
	int sv[2];
	EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	async_on(sv[0]);
	EXPECT(shutdown(sv[1], SHUT_RD), 0);
	got("unix: peer SHUT_RD", 0, sv[0]);
	EXPECT(shutdown(sv[1], SHUT_WR), 0);
	got("unix: peer SHUT_WR", 0, sv[0]);
	close(sv[1]);
	got("unix: peer closed", 0, sv[0]);
	close(sv[0]);
	EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	async_on(sv[0]);
	EXPECT(shutdown(sv[1], SHUT_RDWR), 0);
	got("unix: peer SHUT_RDWR", 0, sv[0]);
	close(sv[0]);
	close(sv[1]);
	EXPECT(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	async_on(sv[1]);
	close(sv[0]);
	got("unix seqpacket: peer closed", 0, sv[1]);
	close(sv[1]);
	/* A writer that found no room hears when there is some again. */
	EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	nonblock(sv[0]);
	nonblock(sv[1]);
	async_on(sv[0]);
	fill(sv[0]);
	got("unix: full, nothing yet", 0, sv[0]);
	drain_until_signal("unix: room again", sv[1], sv[0]);
	got("unix: nothing more", 100, sv[0]);
	close(sv[0]);
	close(sv[1]);
	/* ... only if it asked for signals before it found none (the
	 * socket's SOCK_FASYNC gates SOCKWQ_ASYNC_NOSPACE). */
	EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	nonblock(sv[0]);
	nonblock(sv[1]);
	fill(sv[0]);
	async_on(sv[0]);
	drain_until_signal("unix: O_ASYNC after the fill", sv[1], sv[0]);
	close(sv[0]);
	close(sv[1]);

	/* TCP on loopback. */
	struct sockaddr_in addr;
	int l = listener(&addr);
	async_on(l);
	int c;
	int a = tcp_pair(l, &addr, &c);
	got("tcp: connection to the listener", 2000, l);
	int zero = 0;
	EXPECT(ioctl(l, FIOASYNC, &zero), 0);
	async_on(a);
	EXPECT(write(c, "x", 1), 1);
	got("tcp: data", 2000, a);
	/* More data while the first is unread: another signal. */
	EXPECT(write(c, "y", 1), 1);
	got("tcp: more data", 2000, a);
	EXPECT(read(a, b, sizeof b), 2);
	/* The peer's FIN on a socket still writing: POLL_IN. */
	EXPECT(shutdown(c, SHUT_WR), 0);
	got("tcp: peer FIN, half close", 2000, a);
	got("tcp: then readable", 2000, a);
	got("tcp: nothing more", 100, a);
	close(a);
	close(c);
	flush();

	/* The peer's FIN after this side's own: POLL_HUP. */
	a = tcp_pair(l, &addr, &c);
	async_on(a);
	EXPECT(shutdown(a, SHUT_WR), 0);
	got("tcp: own FIN, nothing", 200, a);
	close(c);
	got("tcp: peer FIN after own", 2000, a);
	got("tcp: then readable", 2000, a);
	got("tcp: nothing more", 100, a);
	close(a);
	flush();

	/* A reset: POLL_ERR. */
	a = tcp_pair(l, &addr, &c);
	async_on(a);
	struct linger lg = { 1, 0 };
	EXPECT(setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
	close(c);
	got("tcp: reset", 2000, a);
	close(a);
	flush();

	/* A non-blocking connect: POLL_OUT when it completes. */
	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	async_on(c);
	int r = connect(c, (struct sockaddr *)&addr, sizeof addr);
	EXPECT_TRUE(r == 0 || errno == EINPROGRESS);
	got("tcp: connected", 2000, c);
	a = accept(l, NULL, NULL);
	EXPECT_TRUE(a >= 0);
	got("tcp: nothing more", 100, c);

	/* A sender that found no room: POLL_OUT once the peer reads. */
	nonblock(a);
	fill(c);
	got("tcp: full, nothing yet", 100, c);
	drain_until_signal("tcp: room again", a, c);
	close(a);
	close(c);
	flush();

	/* A refused connect: POLL_ERR. */
	close(l);
	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	async_on(c);
	connect(c, (struct sockaddr *)&addr, sizeof addr);
	got("tcp: refused", 2000, c);
	close(c);
	flush();

	/* UDP: every datagram. */
	int u = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in ua = loopback(0);
	socklen_t ualen = sizeof ua;
	EXPECT(bind(u, (struct sockaddr *)&ua, sizeof ua), 0);
	EXPECT(getsockname(u, (struct sockaddr *)&ua, &ualen), 0);
	async_on(u);
	int u2 = socket(AF_INET, SOCK_DGRAM, 0);
	EXPECT(sendto(u2, "d", 1, 0, (struct sockaddr *)&ua, sizeof ua), 1);
	got("udp: datagram", 2000, u);
	EXPECT(sendto(u2, "e", 1, 0, (struct sockaddr *)&ua, sizeof ua), 1);
	got("udp: another", 2000, u);
	close(u);
	close(u2);

	/* Netlink: the answer to a request. */
	int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	EXPECT_TRUE(nl >= 0);
	async_on(nl);
	struct {
		struct nlmsghdr h;
		struct ifinfomsg i;
	} req = {
		.h = { .nlmsg_len = sizeof req, .nlmsg_type = RTM_GETLINK,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1 },
		.i = { .ifi_family = AF_UNSPEC },
	};
	EXPECT(send(nl, &req, sizeof req, 0), (long)sizeof req);
	got("netlink: reply", 2000, nl);
	close(nl);
	flush();

	/* inotify: each event queued; one merged into the last is not. */
	char dir[] = "/tmp/sigio-XXXXXX";
	EXPECT_TRUE(mkdtemp(dir) != NULL);
	int in = inotify_init1(IN_NONBLOCK);
	EXPECT_TRUE(in >= 0);
	EXPECT_TRUE(inotify_add_watch(in, dir, IN_CREATE | IN_MODIFY) > 0);
	async_on(in);
	char path[64];
	snprintf(path, sizeof path, "%s/f", dir);
	int f = open(path, O_CREAT | O_WRONLY, 0600);
	got("inotify: create", 0, in);
	EXPECT(write(f, "1", 1), 1);
	got("inotify: modify", 0, in);
	EXPECT(write(f, "2", 1), 1);
	got("inotify: the same again, merged", 0, in);
	close(f);
	unlink(path);
	got("inotify: unlink not watched", 0, in);
	close(in);
	rmdir(dir);
	flush();

	/* /dev/random: its pool is ready, so the flag is kept and no signal
	 * comes. */
	int rnd = open("/dev/random", O_RDONLY);
	async_on(rnd);
	EXPECT_TRUE(fcntl(rnd, F_GETFL) & O_ASYNC);
	EXPECT(read(rnd, b, 16), 16);
	got("random: read", 100, rnd);
	close(rnd);

	/* A pty master that could not write everything hears when the slave
	 * has read its input down (n_tty's write wakeup). */
	int m, s;
	open_pty(&m, &s);
	struct termios t;
	tcgetattr(s, &t);
	cfmakeraw(&t);
	tcsetattr(s, TCSANOW, &t);
	nonblock(m);
	nonblock(s);
	async_on(m);
	fill(m);
	got("pty: full, nothing yet", 100, m);
	drain_until_signal("pty: room again", s, m);
	close(m);
	close(s);
	flush();
	return t_done();
}
