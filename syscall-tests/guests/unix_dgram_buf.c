/* Buffer accounting of Unix datagram and seqpacket sockets, as Linux's
 * unix_dgram_sendmsg: the sender's SO_SNDBUF bounds what its unread
 * datagrams hold (EAGAIN when full, room again once the receiver reads),
 * not the receiver's SO_RCVBUF; a datagram larger than SO_SNDBUF - 32 is
 * EMSGSIZE; a receiver not connected back to the sender takes no more than
 * max_dgram_qlen + 1 datagrams from it (EAGAIN, or a blocking send ending
 * with SO_SNDTIMEO; poll shows POLLOUT again once it reads); SO_SNDBUF and
 * SO_RCVBUF bounded, doubled and kept above their minimums. Counts that
 * depend on the kernel's per-datagram overhead are printed as ranges. */
#include "t.h"
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <stddef.h>
#include <time.h>

static char big[300000];

static int fill(int fd, size_t sz)
{
	int n = 0;
	while (n < 100000 && send(fd, big, sz, MSG_DONTWAIT) == (ssize_t)sz)
		n++;
	if (errno != EAGAIN)
		printf("  fill stopped with %s\n", errname(errno));
	return n;
}

static void range(const char *what, int n, int lo, int hi)
{
	printf("%s: between %d and %d: %s\n", what, lo, hi, n >= lo && n <= hi ? "yes" : "no");
	if (n < lo || n > hi)
		printf("  (got %d)\n", n);
}

static int pollout(int fd)
{
	struct pollfd p = { fd, POLLOUT, 0 };
	poll(&p, 1, 0);
	return !!(p.revents & POLLOUT);
}

static int getbuf(int fd, int opt)
{
	int v = -1;
	socklen_t l = sizeof v;
	getsockopt(fd, SOL_SOCKET, opt, &v, &l);
	return v;
}

static void pair(int type, const char *name)
{
	int sv[2];
	char what[64];
	EXPECT(socketpair(AF_UNIX, type, 0, sv), 0);
	printf("%s: SO_SNDBUF %d\n", name, getbuf(sv[0], SO_SNDBUF));
	int n = fill(sv[0], 100);
	snprintf(what, sizeof what, "%s: 100-byte datagrams queued", name);
	range(what, n, 250, 300);
	printf("  POLLOUT when full: %d\n", pollout(sv[0]));
	char b[200];
	EXPECT(recv(sv[1], b, sizeof b, 0), 100);
	EXPECT(send(sv[0], big, 100, MSG_DONTWAIT), 100);
	EXPECT_ERR(send(sv[0], big, 100, MSG_DONTWAIT), EAGAIN);
	while (recv(sv[1], b, sizeof b, MSG_DONTWAIT) > 0)
		;
	printf("  POLLOUT once read: %d\n", pollout(sv[0]));
	/* The other direction has a buffer of its own. */
	EXPECT(send(sv[1], big, 100, MSG_DONTWAIT), 100);
	close(sv[0]);
	close(sv[1]);

	EXPECT(socketpair(AF_UNIX, type, 0, sv), 0);
	EXPECT_ERR(send(sv[0], big, 212992 - 31, MSG_DONTWAIT), EMSGSIZE);
	EXPECT(send(sv[0], big, 212992 - 32, MSG_DONTWAIT), 212992 - 32);
	/* The buffer is overdrawn now: nothing more, however small. */
	EXPECT_ERR(send(sv[0], big, 1, MSG_DONTWAIT), EAGAIN);
	close(sv[0]);
	close(sv[1]);

	/* Large datagrams count whole pages. */
	EXPECT(socketpair(AF_UNIX, type, 0, sv), 0);
	n = fill(sv[0], 65536);
	snprintf(what, sizeof what, "%s: 64 KiB datagrams queued", name);
	range(what, n, 3, 4);
	close(sv[0]);
	close(sv[1]);

	/* The receiver's SO_RCVBUF does not limit what it is sent. */
	EXPECT(socketpair(AF_UNIX, type, 0, sv), 0);
	int one = 1;
	EXPECT(setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &one, sizeof one), 0);
	printf("%s: receiver SO_RCVBUF %d\n", name, getbuf(sv[1], SO_RCVBUF));
	EXPECT(send(sv[0], big, 4000, MSG_DONTWAIT), 4000);
	EXPECT(send(sv[0], big, 4000, MSG_DONTWAIT), 4000);

	/* A small SO_SNDBUF: fewer datagrams, a smaller largest one. */
	int v = 4096;
	EXPECT(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &v, sizeof v), 0);
	printf("%s: SO_SNDBUF after 4096: %d\n", name, getbuf(sv[0], SO_SNDBUF));
	EXPECT_ERR(send(sv[0], big, 8192 - 31, MSG_DONTWAIT), EMSGSIZE);
	close(sv[0]);
	close(sv[1]);
	EXPECT(socketpair(AF_UNIX, type, 0, sv), 0);
	EXPECT(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &v, sizeof v), 0);
	n = fill(sv[0], 100);
	snprintf(what, sizeof what, "%s: 100-byte datagrams with SO_SNDBUF 8192", name);
	range(what, n, 5, 20);
	close(sv[0]);
	close(sv[1]);
}

static void options(void)
{
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	/* (Not above net.core.wmem_max/rmem_max, which hosts set apart.) */
	int vals[] = { 0, 1, 4096, 100000 };
	for (unsigned i = 0; i < sizeof vals / sizeof vals[0]; i++) {
		int v = vals[i];
		EXPECT(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v), 0);
		EXPECT(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v), 0);
		printf("set %d: SO_SNDBUF %d SO_RCVBUF %d\n", v, getbuf(fd, SO_SNDBUF),
		       getbuf(fd, SO_RCVBUF));
	}
	close(fd);
}

static void unconnected(void)
{
	int r = socket(AF_UNIX, SOCK_DGRAM, 0), s = socket(AF_UNIX, SOCK_DGRAM, 0);
	struct sockaddr_un a = { AF_UNIX };
	snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "udb-%d", getpid());
	socklen_t l = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(a.sun_path + 1);
	EXPECT(bind(r, (struct sockaddr *)&a, l), 0);
	int n = 0;
	while (n < 1000 && sendto(s, big, 10, MSG_DONTWAIT, (struct sockaddr *)&a, l) == 10)
		n++;
	printf("unconnected sender: %d queued, then %s\n", n, errname(errno));

	/* A blocking send waits, and SO_SNDTIMEO ends the wait. */
	struct timeval tv = { 0, 200000 };
	EXPECT(setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv), 0);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	EXPECT_ERR(sendto(s, big, 10, 0, (struct sockaddr *)&a, l), EAGAIN);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double el = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("  blocking send waited about 0.2s: %s\n", el >= 0.1 && el < 2 ? "yes" : "no");

	/* Connected one way only: poll shows the receiver's queue. */
	EXPECT(connect(s, (struct sockaddr *)&a, l), 0);
	printf("  POLLOUT with the receiver's queue full: %d\n", pollout(s));
	char b[16];
	EXPECT(recv(r, b, sizeof b, 0), 10);
	printf("  POLLOUT after one read: %d\n", pollout(s));
	EXPECT(send(s, big, 10, MSG_DONTWAIT), 10);
	EXPECT_ERR(send(s, big, 10, MSG_DONTWAIT), EAGAIN);

	/* Another sender is held back the same way. */
	int s2 = socket(AF_UNIX, SOCK_DGRAM, 0);
	EXPECT_ERR(sendto(s2, big, 10, MSG_DONTWAIT, (struct sockaddr *)&a, l), EAGAIN);
	/* Closing the receiver gives the senders' buffers back. */
	close(r);
	EXPECT_ERR(send(s, big, 10, MSG_DONTWAIT), ECONNREFUSED);
	close(s);
	close(s2);
}

int main(void)
{
	pair(SOCK_DGRAM, "dgram pair");
	pair(SOCK_SEQPACKET, "seqpacket pair");
	options();
	unconnected();
	return t_done();
}
