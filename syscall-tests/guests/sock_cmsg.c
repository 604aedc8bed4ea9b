/* Control messages a UDP or TCP socket asks for (issue 7): IP_PKTINFO,
 * IP_RECVTTL, IP_RECVTOS, IPV6_RECVPKTINFO, IPV6_RECVHOPLIMIT,
 * SO_TIMESTAMP and SO_TIMESTAMPNS over loopback: each message's level,
 * type, length and contents, their order, getsockopt reporting the
 * options (the timestamp ones replacing one another), MSG_CTRUNC and the
 * msg_controllen Linux's put_cmsg leaves when the buffer is short, none
 * without a buffer, and TCP getting none of the IP-level ones. Times are printed
 * only as facts (between a clock reading before the send and one after
 * the receive). */
#include "t.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>

static struct timespec before, after;

static int le(struct timespec a, struct timespec b)
{
	return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec <= b.tv_nsec);
}

static void on(int fd, int level, int name, const char *what)
{
	int one = 1;
	if (setsockopt(fd, level, name, &one, sizeof one) < 0)
		printf("setsockopt %s: %s\n", what, errname(errno));
}

static void show_opt(int fd, int level, int name, const char *what)
{
	int v = -1;
	socklen_t l = sizeof v;
	if (getsockopt(fd, level, name, &v, &l) < 0)
		printf("getsockopt %s: %s\n", what, errname(errno));
	else
		printf("getsockopt %s: %d (len %u)\n", what, v, l);
}

static void show_cmsgs(struct msghdr *m)
{
	printf("  msg_controllen=%zu flags:%s%s\n", (size_t)m->msg_controllen,
	       m->msg_flags & MSG_CTRUNC ? " MSG_CTRUNC" : "",
	       m->msg_flags & MSG_TRUNC ? " MSG_TRUNC" : "");
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		unsigned char *d = CMSG_DATA(c);
		size_t dl = c->cmsg_len >= CMSG_LEN(0) ? c->cmsg_len - CMSG_LEN(0) : 0;
		printf("  cmsg level=%d type=%d len=%zu:", c->cmsg_level, c->cmsg_type,
		       (size_t)c->cmsg_len);
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMP && dl >= sizeof(struct timeval)) {
			struct timeval tv;
			memcpy(&tv, d, sizeof tv);
			struct timespec ts = { tv.tv_sec, tv.tv_usec * 1000 };
			struct timespec b = { before.tv_sec, before.tv_nsec / 1000 * 1000 };
			printf(" timeval usec<1e6:%s between:%s", tv.tv_usec < 1000000 ? "yes" : "no",
			       le(b, ts) && le(ts, after) ? "yes" : "no");
		} else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPNS && dl >= sizeof(struct timespec)) {
			struct timespec ts;
			memcpy(&ts, d, sizeof ts);
			printf(" timespec between:%s", le(before, ts) && le(ts, after) ? "yes" : "no");
		} else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO && dl >= sizeof(struct in_pktinfo)) {
			struct in_pktinfo pi;
			char a[32], b[32];
			memcpy(&pi, d, sizeof pi);
			inet_ntop(AF_INET, &pi.ipi_spec_dst, a, sizeof a);
			inet_ntop(AF_INET, &pi.ipi_addr, b, sizeof b);
			printf(" ifindex=%d spec_dst=%s addr=%s", pi.ipi_ifindex, a, b);
		} else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO && dl >= sizeof(struct in6_pktinfo)) {
			struct in6_pktinfo pi;
			char a[64];
			memcpy(&pi, d, sizeof pi);
			inet_ntop(AF_INET6, &pi.ipi6_addr, a, sizeof a);
			printf(" ifindex=%d addr=%s", pi.ipi6_ifindex, a);
		} else if (dl == 4) {
			int v;
			memcpy(&v, d, 4);
			printf(" int %d", v);
		} else {
			for (size_t i = 0; i < dl; i++)
				printf(" %02x", d[i]);
		}
		printf("\n");
	}
}

/* Sends "hello" from tx to rx's address, receives it with a control
 * buffer of `room` bytes and prints what came. */
static void round_trip(const char *what, int tx, int rx, struct sockaddr *to, socklen_t tl,
		       size_t room, int use_control)
{
	char data[16];
	union {
		char b[512];
		struct cmsghdr align;
	} ctl;
	memset(&ctl, 0xee, sizeof ctl);
	clock_gettime(CLOCK_REALTIME, &before);
	if (to) {
		if (sendto(tx, "hello", 5, 0, to, tl) != 5)
			t_fail("sendto");
	} else if (send(tx, "hello", 5, 0) != 5) {
		t_fail("send");
	}
	struct iovec iov = { data, sizeof data };
	struct msghdr m = { 0 };
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = use_control ? ctl.b : NULL;
	m.msg_controllen = room;
	long n = recvmsg(rx, &m, 0);
	clock_gettime(CLOCK_REALTIME, &after);
	printf("%s: recvmsg=%ld\n", what, n);
	if (n >= 0)
		show_cmsgs(&m);
	if (use_control && room < sizeof ctl.b)
		printf("  byte past the room untouched: %s\n",
		       (unsigned char)ctl.b[room] == 0xee ? "yes" : "no");
}

static void udp4(void)
{
	int rx = socket(AF_INET, SOCK_DGRAM, 0), tx = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof a;
	EXPECT(bind(rx, (struct sockaddr *)&a, sizeof a), 0);
	EXPECT(getsockname(rx, (struct sockaddr *)&a, &l), 0);
	struct sockaddr *to = (struct sockaddr *)&a;

	show_opt(rx, IPPROTO_IP, IP_PKTINFO, "IP_PKTINFO (default)");
	show_opt(rx, SOL_SOCKET, SO_TIMESTAMP, "SO_TIMESTAMP (default)");
	round_trip("udp4 nothing asked", tx, rx, to, sizeof a, 512, 1);

	on(rx, IPPROTO_IP, IP_PKTINFO, "IP_PKTINFO");
	on(rx, IPPROTO_IP, IP_RECVTTL, "IP_RECVTTL");
	on(rx, IPPROTO_IP, IP_RECVTOS, "IP_RECVTOS");
	on(rx, SOL_SOCKET, SO_TIMESTAMP, "SO_TIMESTAMP");
	show_opt(rx, IPPROTO_IP, IP_PKTINFO, "IP_PKTINFO");
	show_opt(rx, IPPROTO_IP, IP_RECVTTL, "IP_RECVTTL");
	show_opt(rx, IPPROTO_IP, IP_RECVTOS, "IP_RECVTOS");
	show_opt(rx, SOL_SOCKET, SO_TIMESTAMP, "SO_TIMESTAMP");
	show_opt(rx, SOL_SOCKET, SO_TIMESTAMPNS, "SO_TIMESTAMPNS");
	round_trip("udp4 all", tx, rx, to, sizeof a, 512, 1);

	/* Short buffers: cut where Linux cuts, MSG_CTRUNC. */
	round_trip("udp4 room 52", tx, rx, to, sizeof a, 52, 1);
	round_trip("udp4 room 100", tx, rx, to, sizeof a, 100, 1);
	round_trip("udp4 room 10", tx, rx, to, sizeof a, 10, 1);
	round_trip("udp4 no buffer", tx, rx, to, sizeof a, 0, 0);

	/* SO_TIMESTAMPNS replaces SO_TIMESTAMP. */
	on(rx, SOL_SOCKET, SO_TIMESTAMPNS, "SO_TIMESTAMPNS");
	show_opt(rx, SOL_SOCKET, SO_TIMESTAMP, "SO_TIMESTAMP after NS");
	show_opt(rx, SOL_SOCKET, SO_TIMESTAMPNS, "SO_TIMESTAMPNS after NS");
	int zero = 0;
	EXPECT(setsockopt(rx, IPPROTO_IP, IP_RECVTTL, &zero, sizeof zero), 0);
	/* A single byte is enough at the IP level, not at the socket level. */
	char c0 = 0;
	EXPECT(setsockopt(rx, IPPROTO_IP, IP_RECVTOS, &c0, 1), 0);
	EXPECT_ERR(setsockopt(rx, SOL_SOCKET, SO_TIMESTAMP, &c0, 1), EINVAL);
	show_opt(rx, IPPROTO_IP, IP_RECVTOS, "IP_RECVTOS after a zero byte");
	round_trip("udp4 pktinfo and timestampns", tx, rx, to, sizeof a, 512, 1);
	/* IPv6 options on an IPv4 socket. */
	EXPECT_ERR(setsockopt(rx, IPPROTO_IPV6, IPV6_RECVPKTINFO, &zero, sizeof zero), ENOPROTOOPT);
	close(rx);
	close(tx);
}

static void udp6(void)
{
	int rx = socket(AF_INET6, SOCK_DGRAM, 0), tx = socket(AF_INET6, SOCK_DGRAM, 0);
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	socklen_t l = sizeof a;
	if (bind(rx, (struct sockaddr *)&a, sizeof a) < 0) {
		printf("no ::1 (%s)\n", errname(errno));
		return;
	}
	EXPECT(getsockname(rx, (struct sockaddr *)&a, &l), 0);
	on(rx, IPPROTO_IPV6, IPV6_RECVPKTINFO, "IPV6_RECVPKTINFO");
	on(rx, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, "IPV6_RECVHOPLIMIT");
	show_opt(rx, IPPROTO_IPV6, IPV6_RECVPKTINFO, "IPV6_RECVPKTINFO");
	show_opt(rx, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, "IPV6_RECVHOPLIMIT");
	round_trip("udp6 pktinfo and hop limit", tx, rx, (struct sockaddr *)&a, sizeof a, 512, 1);
	round_trip("udp6 room 40", tx, rx, (struct sockaddr *)&a, sizeof a, 40, 1);
	close(rx);
	close(tx);
}

static void tcp(void)
{
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof a;
	EXPECT(bind(ls, (struct sockaddr *)&a, sizeof a), 0);
	EXPECT(getsockname(ls, (struct sockaddr *)&a, &l), 0);
	EXPECT(listen(ls, 1), 0);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	EXPECT(connect(c, (struct sockaddr *)&a, sizeof a), 0);
	int s = accept(ls, NULL, NULL);
	on(s, IPPROTO_IP, IP_PKTINFO, "IP_PKTINFO");
	on(s, IPPROTO_IP, IP_RECVTTL, "IP_RECVTTL");
	show_opt(s, IPPROTO_IP, IP_PKTINFO, "tcp IP_PKTINFO");
	/* No IP-level message on a stream (whether a timestamp comes
	 * depends on whether the kernel stamped the segment, so it is not
	 * asked for here). */
	round_trip("tcp: no IP-level messages", c, s, NULL, 0, 512, 1);
	close(s);
	close(c);
	close(ls);
}

int main(void)
{
	udp4();
	udp6();
	tcp();
	return t_done();
}
