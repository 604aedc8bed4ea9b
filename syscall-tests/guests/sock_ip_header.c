/* The options that shape the IP header of what a socket sends (issue 7):
 * IP_TTL, IP_TOS, IP_MULTICAST_TTL, IPV6_UNICAST_HOPS, IPV6_TCLASS are
 * stored and read back as Linux does (its defaults, -1 meaning the
 * default, the ranges, TCP's ECN bits masked, one-byte values at the IP
 * level, IPv6 options refused on AF_INET sockets) and they reach the
 * packets: a receiver with IP_RECVTTL / IP_RECVTOS / IPV6_RECVHOPLIMIT /
 * IPV6_RECVTCLASS sees the sender's values, per datagram, and a
 * dual-stack sender uses its IPv4 options towards a v4-mapped peer. */
#include "t.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

static void set_get(int fd, int level, int name, const char *what, int v, int len)
{
	errno = 0;
	int r = setsockopt(fd, level, name, &v, len);
	int e = errno;
	int g = -7;
	socklen_t gl = sizeof g;
	int r2 = getsockopt(fd, level, name, &g, &gl);
	printf("%s = %d (len %d): %d %s; reads %d (len %u) %s\n", what, v, len, r, r ? errname(e) : "",
	       g, gl, r2 ? errname(errno) : "");
}

static void header_options(int type, const char *tname)
{
	int fd = socket(AF_INET, type, 0), f6 = socket(AF_INET6, type, 0);
	printf("-- %s\n", tname);
	int v = -7;
	socklen_t l = sizeof v;
	EXPECT(getsockopt(fd, IPPROTO_IP, IP_TTL, &v, &l), 0);
	printf("IP_TTL default %d\n", v);
	EXPECT(getsockopt(fd, IPPROTO_IP, IP_TOS, &v, &l), 0);
	printf("IP_TOS default %d\n", v);
	EXPECT(getsockopt(f6, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &v, &l), 0);
	printf("IPV6_UNICAST_HOPS default %d\n", v);
	EXPECT(getsockopt(f6, IPPROTO_IPV6, IPV6_TCLASS, &v, &l), 0);
	printf("IPV6_TCLASS default %d\n", v);
	EXPECT(getsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &v, &l), 0);
	printf("IP_MULTICAST_TTL default %d\n", v);

	set_get(fd, IPPROTO_IP, IP_TTL, "IP_TTL", 200, 4);
	set_get(fd, IPPROTO_IP, IP_TTL, "IP_TTL", -1, 4);
	set_get(fd, IPPROTO_IP, IP_TTL, "IP_TTL", 0, 4);
	set_get(fd, IPPROTO_IP, IP_TTL, "IP_TTL", 256, 4);
	set_get(fd, IPPROTO_IP, IP_TTL, "IP_TTL", -2, 4);
	set_get(fd, IPPROTO_IP, IP_TTL, "IP_TTL", 7, 1);
	set_get(fd, IPPROTO_IP, IP_TTL, "IP_TTL", 5, 0);
	set_get(fd, IPPROTO_IP, IP_TOS, "IP_TOS", 0x13, 4);
	set_get(fd, IPPROTO_IP, IP_TOS, "IP_TOS", 0x1ff, 4);
	set_get(fd, IPPROTO_IP, IP_TOS, "IP_TOS", -1, 4);
	set_get(fd, IPPROTO_IP, IP_TOS, "IP_TOS", 0x22, 1);
	set_get(fd, IPPROTO_IP, IP_TOS, "IP_TOS", 5, 0);
	set_get(fd, IPPROTO_IP, IP_MULTICAST_TTL, "IP_MULTICAST_TTL", 3, 4);
	set_get(fd, IPPROTO_IP, IP_MULTICAST_TTL, "IP_MULTICAST_TTL", -1, 4);
	set_get(fd, IPPROTO_IP, IP_MULTICAST_TTL, "IP_MULTICAST_TTL", 300, 4);
	set_get(fd, IPPROTO_IP, IP_MULTICAST_TTL, "IP_MULTICAST_TTL", 3, 0);
	set_get(f6, IPPROTO_IPV6, IPV6_UNICAST_HOPS, "IPV6_UNICAST_HOPS", 0, 4);
	set_get(f6, IPPROTO_IPV6, IPV6_UNICAST_HOPS, "IPV6_UNICAST_HOPS", 255, 4);
	set_get(f6, IPPROTO_IPV6, IPV6_UNICAST_HOPS, "IPV6_UNICAST_HOPS", 256, 4);
	set_get(f6, IPPROTO_IPV6, IPV6_UNICAST_HOPS, "IPV6_UNICAST_HOPS", -2, 4);
	set_get(f6, IPPROTO_IPV6, IPV6_UNICAST_HOPS, "IPV6_UNICAST_HOPS", 9, 2);
	set_get(f6, IPPROTO_IPV6, IPV6_UNICAST_HOPS, "IPV6_UNICAST_HOPS", -1, 4);
	set_get(f6, IPPROTO_IPV6, IPV6_TCLASS, "IPV6_TCLASS", 0x13, 4);
	set_get(f6, IPPROTO_IPV6, IPV6_TCLASS, "IPV6_TCLASS", 0x1ff, 4);
	set_get(f6, IPPROTO_IPV6, IPV6_TCLASS, "IPV6_TCLASS", -2, 4);
	set_get(f6, IPPROTO_IPV6, IPV6_TCLASS, "IPV6_TCLASS", -1, 4);
	set_get(f6, IPPROTO_IPV6, IPV6_TCLASS, "IPV6_TCLASS", 3, 2);
	/* The IPv4 options live on an AF_INET6 socket too. */
	set_get(f6, IPPROTO_IP, IP_TTL, "v6 IP_TTL", 9, 4);
	set_get(f6, IPPROTO_IP, IP_TOS, "v6 IP_TOS", 8, 4);
	/* The IPv6 ones do not on an AF_INET socket. */
	v = 3;
	EXPECT_ERR(setsockopt(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &v, sizeof v), ENOPROTOOPT);
	EXPECT_ERR(setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &v, sizeof v), ENOPROTOOPT);
	EXPECT_ERR(getsockopt(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &v, &l), EOPNOTSUPP);
	/* An IP-level value read into less than an int: one byte. */
	unsigned char c[4] = { 9, 9, 9, 9 };
	l = 3;
	EXPECT(getsockopt(fd, IPPROTO_IP, IP_TTL, c, &l), 0);
	printf("IP_TTL into 3 bytes: len %u bytes %d %d\n", l, c[0], c[1]);
	l = 0;
	EXPECT(getsockopt(fd, IPPROTO_IP, IP_TTL, c, &l), 0);
	printf("IP_TTL into 0 bytes: len %u\n", l);
	c[0] = c[1] = 9;
	l = 1;
	EXPECT(getsockopt(f6, IPPROTO_IPV6, IPV6_UNICAST_HOPS, c, &l), 0);
	printf("IPV6_UNICAST_HOPS into 1 byte: len %u bytes %d %d\n", l, c[0], c[1]);
	close(fd);
	close(f6);
}

static void on(int fd, int level, int name)
{
	int one = 1;
	EXPECT(setsockopt(fd, level, name, &one, sizeof one), 0);
}

static void seti(int fd, int level, int name, int v)
{
	EXPECT(setsockopt(fd, level, name, &v, sizeof v), 0);
}

/* Sends "hi" from tx to `to` and prints the header facts rx's control
 * messages report. */
static void trip(const char *what, int tx, int rx, struct sockaddr *to, socklen_t tl)
{
	char data[8];
	union {
		char b[256];
		struct cmsghdr align;
	} ctl;
	if (sendto(tx, "hi", 2, 0, to, tl) != 2)
		t_fail("sendto");
	struct iovec iov = { data, sizeof data };
	struct msghdr m = { 0 };
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctl.b;
	m.msg_controllen = sizeof ctl.b;
	long n = recvmsg(rx, &m, 0);
	printf("%s: recvmsg=%ld", what, n);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); n >= 0 && c; c = CMSG_NXTHDR(&m, c)) {
		unsigned char *d = CMSG_DATA(c);
		size_t dl = c->cmsg_len - CMSG_LEN(0);
		int v = dl == 1 ? d[0] : -1;
		if (dl == 4)
			memcpy(&v, d, 4);
		const char *name = c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL ? "IP_TTL"
			: c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS ? "IP_TOS"
			: c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_HOPLIMIT ? "IPV6_HOPLIMIT"
			: c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS ? "IPV6_TCLASS"
			: "other";
		printf(" %s(len %zu)=%d", name, dl, v);
	}
	printf("\n");
}

static void udp4(void)
{
	int rx = socket(AF_INET, SOCK_DGRAM, 0), tx = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof a;
	EXPECT(bind(rx, (struct sockaddr *)&a, sizeof a), 0);
	EXPECT(getsockname(rx, (struct sockaddr *)&a, &l), 0);
	on(rx, IPPROTO_IP, IP_RECVTTL);
	on(rx, IPPROTO_IP, IP_RECVTOS);
	struct sockaddr *to = (struct sockaddr *)&a;
	trip("udp4 defaults", tx, rx, to, sizeof a);
	seti(tx, IPPROTO_IP, IP_TTL, 17);
	seti(tx, IPPROTO_IP, IP_TOS, 0xb9);
	trip("udp4 ttl 17 tos 0xb9", tx, rx, to, sizeof a);
	/* Each datagram carries what was set when it was sent. */
	if (sendto(tx, "hi", 2, 0, to, sizeof a) != 2)
		t_fail("sendto");
	seti(tx, IPPROTO_IP, IP_TTL, -1);
	seti(tx, IPPROTO_IP, IP_TOS, 0x10);
	trip("udp4 queued before the change", tx, rx, to, sizeof a);
	trip("udp4 ttl default tos 0x10", tx, rx, to, sizeof a);
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
	on(rx, IPPROTO_IPV6, IPV6_RECVHOPLIMIT);
	on(rx, IPPROTO_IPV6, IPV6_RECVTCLASS);
	int v = -7;
	l = sizeof v;
	EXPECT(getsockopt(rx, IPPROTO_IPV6, IPV6_RECVTCLASS, &v, &l), 0);
	printf("IPV6_RECVTCLASS reads %d\n", v);
	struct sockaddr *to = (struct sockaddr *)&a;
	trip("udp6 defaults", tx, rx, to, sizeof a);
	seti(tx, IPPROTO_IPV6, IPV6_UNICAST_HOPS, 3);
	seti(tx, IPPROTO_IPV6, IPV6_TCLASS, 0x2d);
	/* The IPv4 options do not touch IPv6 packets. */
	seti(tx, IPPROTO_IP, IP_TTL, 99);
	seti(tx, IPPROTO_IP, IP_TOS, 0x44);
	trip("udp6 hops 3 tclass 0x2d", tx, rx, to, sizeof a);
	seti(tx, IPPROTO_IPV6, IPV6_UNICAST_HOPS, 0);
	trip("udp6 hops 0", tx, rx, to, sizeof a);
	close(rx);

	/* A dual-stack sender to an IPv4 receiver: the IPv4 options count. */
	int r4 = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in b = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	l = sizeof b;
	EXPECT(bind(r4, (struct sockaddr *)&b, sizeof b), 0);
	EXPECT(getsockname(r4, (struct sockaddr *)&b, &l), 0);
	on(r4, IPPROTO_IP, IP_RECVTTL);
	on(r4, IPPROTO_IP, IP_RECVTOS);
	struct sockaddr_in6 m = { .sin6_family = AF_INET6, .sin6_port = b.sin_port };
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &m.sin6_addr);
	trip("udp6 to v4-mapped: ttl 99 tos 0x44", tx, r4, (struct sockaddr *)&m, sizeof m);
	close(r4);
	close(tx);
}

static void tcp(void)
{
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof a;
	EXPECT(bind(ls, (struct sockaddr *)&a, sizeof a), 0);
	EXPECT(getsockname(ls, (struct sockaddr *)&a, &l), 0);
	seti(ls, IPPROTO_IP, IP_TTL, 33);
	seti(ls, IPPROTO_IP, IP_TOS, 0x28);
	EXPECT(listen(ls, 1), 0);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	seti(c, IPPROTO_IP, IP_TTL, 5);
	EXPECT(connect(c, (struct sockaddr *)&a, sizeof a), 0);
	int s = accept(ls, NULL, NULL);
	int v = -7;
	l = sizeof v;
	EXPECT(getsockopt(s, IPPROTO_IP, IP_TTL, &v, &l), 0);
	printf("accepted IP_TTL %d\n", v);
	EXPECT(getsockopt(s, IPPROTO_IP, IP_TOS, &v, &l), 0);
	printf("accepted IP_TOS %d\n", v);
	/* Changing them on a live connection is fine; data still flows. */
	seti(s, IPPROTO_IP, IP_TTL, 1);
	seti(c, IPPROTO_IP, IP_TOS, 0x10);
	char buf[4];
	EXPECT(write(c, "abc", 3), 3);
	EXPECT(read(s, buf, sizeof buf), 3);
	EXPECT(write(s, "de", 2), 2);
	EXPECT(read(c, buf, sizeof buf), 2);
	close(s);
	close(c);
	close(ls);
}

int main(void)
{
	header_options(SOCK_DGRAM, "udp");
	header_options(SOCK_STREAM, "tcp");
	udp4();
	udp6();
	tcp();
	return t_done();
}
