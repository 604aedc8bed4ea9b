/* SO_TIMESTAMPING on UDP and TCP (issue 7): the flags read back as set
 * (the _NEW option only when set through it), Linux's checks of them,
 * and with SOF_TIMESTAMPING_RX_SOFTWARE|SOF_TIMESTAMPING_SOFTWARE every
 * receive carries SCM_TIMESTAMPING: three timespecs, the first the
 * software stamp (taken when the data arrived, so within the send), the
 * other two zero; after SO_TIMESTAMPNS's message when both are asked
 * for. Transmit flags are accepted (no transmit stamp is read here). */
#include "t.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

/* linux/net_tstamp.h, spelled out: the build's headers may be older
 * than the kernel. */
#define TX_SOFTWARE (1 << 1)
#define RX_SOFTWARE (1 << 3)
#define SOFTWARE (1 << 4)
#define OPT_ID (1 << 7)
#define OPT_TSONLY (1 << 11)
#define OPT_STATS (1 << 12)
#define BIND_PHC (1 << 15)
#define OPT_ID_TCP (1 << 16)
#define OPT_RX_FILTER (1 << 17)
#define TS_OLD 37
#define TS_NEW 65

static long long ns(struct timespec t)
{
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static struct timespec now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return t;
}

static void pause_ms(long ms)
{
	struct timespec d = { 0, ms * 1000000L };
	nanosleep(&d, NULL);
}

static int set_ts(int fd, int name, int flags)
{
	return setsockopt(fd, SOL_SOCKET, name, &flags, sizeof flags);
}

static int get_ts(int fd, int name)
{
	int v = -1;
	socklen_t l = sizeof v;
	if (getsockopt(fd, SOL_SOCKET, name, &v, &l) < 0)
		return -1;
	return v;
}

/* What one receive's control messages said. */
struct seen {
	int n;			/* bytes read */
	int kinds[4];		/* SOL_SOCKET message types, in order */
	int nkinds;
	int ts_len_ok;		/* SCM_TIMESTAMPING was three timespecs */
	long long sw;		/* its first timespec */
	int rest_zero;		/* the other two were zero */
	long long tsns;		/* SO_TIMESTAMPNS's stamp */
};

static struct seen receive(int fd)
{
	char data[64];
	union {
		char b[256];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { data, sizeof data };
	struct msghdr m = { 0 };
	struct seen s = { 0 };
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctl.b;
	m.msg_controllen = sizeof ctl.b;
	s.n = recvmsg(fd, &m, 0);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || s.nkinds == 4)
			continue;
		s.kinds[s.nkinds++] = c->cmsg_type;
		if (c->cmsg_type == TS_OLD || c->cmsg_type == TS_NEW) {
			struct timespec t[3];
			s.ts_len_ok = c->cmsg_len == CMSG_LEN(sizeof t);
			memcpy(t, CMSG_DATA(c), sizeof t);
			s.sw = ns(t[0]);
			s.rest_zero = ns(t[1]) == 0 && ns(t[2]) == 0;
		}
		if (c->cmsg_type == SO_TIMESTAMPNS) {
			struct timespec t;
			memcpy(&t, CMSG_DATA(c), sizeof t);
			s.tsns = ns(t);
		}
	}
	return s;
}

static void print_kinds(const char *what, struct seen s)
{
	printf("%s: read %d, messages:", what, s.n);
	for (int i = 0; i < s.nkinds; i++)
		printf(" %d", s.kinds[i]);
	printf("\n");
}

static socklen_t loopback(int family, struct sockaddr_storage *st)
{
	memset(st, 0, sizeof *st);
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)st;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		return sizeof *a;
	}
	struct sockaddr_in6 *a = (struct sockaddr_in6 *)st;
	a->sin6_family = AF_INET6;
	a->sin6_addr = in6addr_loopback;
	return sizeof *a;
}

static void udp(int family)
{
	const char *name = family == AF_INET ? "udp4" : "udp6";
	int rx = socket(family, SOCK_DGRAM, 0), tx = socket(family, SOCK_DGRAM, 0);
	struct sockaddr_storage st;
	socklen_t l = loopback(family, &st);
	EXPECT(bind(rx, (struct sockaddr *)&st, l), 0);
	EXPECT(getsockname(rx, (struct sockaddr *)&st, &l), 0);

	EXPECT(set_ts(rx, TS_OLD, RX_SOFTWARE | SOFTWARE), 0);
	EXPECT(get_ts(rx, TS_OLD), RX_SOFTWARE | SOFTWARE);
	/* Set through the old option: the new one reads 0. */
	EXPECT(get_ts(rx, TS_NEW), 0);
	struct timespec b = now();
	EXPECT(sendto(tx, "one", 3, 0, (struct sockaddr *)&st, l), 3);
	struct timespec a = now();
	pause_ms(50);
	struct seen s = receive(rx);
	print_kinds(name, s);
	EXPECT_TRUE(s.ts_len_ok);
	EXPECT_TRUE(ns(b) <= s.sw && s.sw <= ns(a));
	EXPECT_TRUE(s.rest_zero);

	/* With SO_TIMESTAMPNS too: its message first, the same stamp. */
	int one = 1;
	EXPECT(setsockopt(rx, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one), 0);
	EXPECT(sendto(tx, "two", 3, 0, (struct sockaddr *)&st, l), 3);
	s = receive(rx);
	print_kinds(name, s);
	EXPECT_TRUE(s.tsns == s.sw);
	one = 0;
	EXPECT(setsockopt(rx, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one), 0);

	/* The _NEW option: the _NEW message type, both options read it. */
	EXPECT(set_ts(rx, TS_NEW, RX_SOFTWARE | SOFTWARE), 0);
	EXPECT(get_ts(rx, TS_NEW), RX_SOFTWARE | SOFTWARE);
	EXPECT(get_ts(rx, TS_OLD), RX_SOFTWARE | SOFTWARE);
	EXPECT(sendto(tx, "new", 3, 0, (struct sockaddr *)&st, l), 3);
	print_kinds(name, receive(rx));

	/* Stamps taken but not reported (no SOFTWARE), or reporting without
	 * taking them under OPT_RX_FILTER: no message. */
	EXPECT(set_ts(rx, TS_OLD, RX_SOFTWARE), 0);
	EXPECT(sendto(tx, "rx only", 7, 0, (struct sockaddr *)&st, l), 7);
	print_kinds(name, receive(rx));
	EXPECT(set_ts(rx, TS_OLD, SOFTWARE | OPT_RX_FILTER), 0);
	EXPECT(sendto(tx, "filtered", 8, 0, (struct sockaddr *)&st, l), 8);
	print_kinds(name, receive(rx));
	EXPECT(set_ts(rx, TS_OLD, 0), 0);
	EXPECT(get_ts(rx, TS_OLD), 0);
	close(rx);
	close(tx);
}

static void tcp(int family)
{
	const char *name = family == AF_INET ? "tcp4" : "tcp6";
	int ls = socket(family, SOCK_STREAM, 0), c = socket(family, SOCK_STREAM, 0);
	struct sockaddr_storage st;
	socklen_t l = loopback(family, &st);
	EXPECT(bind(ls, (struct sockaddr *)&st, l), 0);
	EXPECT(getsockname(ls, (struct sockaddr *)&st, &l), 0);
	/* OPT_ID needs a connection's sequence numbers. */
	EXPECT_ERR(set_ts(c, TS_OLD, OPT_ID), EINVAL);
	EXPECT(listen(ls, 1), 0);
	EXPECT_ERR(set_ts(ls, TS_OLD, OPT_ID), EINVAL);
	EXPECT(connect(c, (struct sockaddr *)&st, l), 0);
	int s = accept(ls, NULL, NULL);
	EXPECT_TRUE(s >= 0);
	EXPECT(set_ts(c, TS_OLD, OPT_ID | TX_SOFTWARE | SOFTWARE), 0);
	EXPECT(get_ts(c, TS_OLD), OPT_ID | TX_SOFTWARE | SOFTWARE);
	EXPECT(set_ts(s, TS_OLD, RX_SOFTWARE | SOFTWARE), 0);
	struct timespec b = now();
	EXPECT(send(c, "hello", 5, 0), 5);
	pause_ms(20);
	struct seen r = receive(s);
	struct timespec a = now();
	print_kinds(name, r);
	EXPECT_TRUE(r.ts_len_ok);
	EXPECT_TRUE(ns(b) <= r.sw && r.sw <= ns(a));
	EXPECT_TRUE(r.rest_zero);
	close(s);
	close(c);
	close(ls);
}

int main(void)
{
	/* Linux turns receive stamping on for the whole system a moment
	 * after the first socket asks (see sock_rx_timestamp.c). */
	int warm = socket(AF_INET, SOCK_DGRAM, 0);
	EXPECT(set_ts(warm, TS_OLD, RX_SOFTWARE | SOFTWARE), 0);
	pause_ms(200);

	/* Linux's checks of the flags. */
	int u = socket(AF_INET, SOCK_DGRAM, 0);
	EXPECT_ERR(set_ts(u, TS_OLD, 1 << 30), EINVAL);
	EXPECT_ERR(set_ts(u, TS_OLD, OPT_ID_TCP), EINVAL);
	EXPECT_ERR(set_ts(u, TS_OLD, OPT_STATS), EINVAL);
	EXPECT(set_ts(u, TS_OLD, OPT_STATS | OPT_TSONLY), 0);
	EXPECT_ERR(set_ts(u, TS_OLD, BIND_PHC), EOPNOTSUPP);
	EXPECT(set_ts(u, TS_OLD, OPT_ID | TX_SOFTWARE | SOFTWARE), 0);
	int two = 0;
	EXPECT_ERR(setsockopt(u, SOL_SOCKET, TS_OLD, &two, 2), EINVAL);
	/* A struct so_timestamping works as its flags. */
	int st[2] = { RX_SOFTWARE, 0 };
	EXPECT(setsockopt(u, SOL_SOCKET, TS_OLD, st, sizeof st), 0);
	int got[3] = { -1, -1, -1 };
	socklen_t gl = sizeof got;
	EXPECT(getsockopt(u, SOL_SOCKET, TS_OLD, got, &gl), 0);
	printf("so_timestamping read back: len %u, flags %#x, bind_phc %d\n", gl, got[0], got[1]);
	close(u);

	udp(AF_INET);
	udp(AF_INET6);
	tcp(AF_INET);
	tcp(AF_INET6);
	close(warm);
	return t_done();
}
