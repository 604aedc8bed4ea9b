/* IP_TOS and IPV6_TCLASS on TCP sockets (issue 7): read back as set,
 * TCP's ECN bits masked, -1 meaning the default; an accepted socket
 * inherits its listener's values (a dual-stack listener's IPv4 ones for
 * an IPv4 peer); changed on live connections, data still flows both
 * ways. The TOS and TTL reach the segments: an accepted IPv4 socket's
 * IP_PKTOPTIONS reports those of the handshake (and IP_MULTICAST_TTL
 * its TTL); other sockets report their defaults. (The netstack's unit
 * tests check every segment's header.) */
#include "t.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

static int geti(int fd, int level, int name)
{
	int v = -7;
	socklen_t l = sizeof v;
	if (getsockopt(fd, level, name, &v, &l) < 0)
		return -errno;
	return v;
}

static int seti(int fd, int level, int name, int v)
{
	return setsockopt(fd, level, name, &v, sizeof v);
}

static void flows(int c, int s)
{
	char buf[8];
	EXPECT(write(c, "abc", 3), 3);
	EXPECT(read(s, buf, sizeof buf), 3);
	EXPECT(write(s, "de", 2), 2);
	EXPECT(read(c, buf, sizeof buf), 2);
}

/* getsockopt(IP_PKTOPTIONS): each message's level, type, length and
 * value (in_pktinfo: ifindex and whether both addresses are
 * 127.0.0.1). */
static void pktoptions(const char *what, int fd, socklen_t room)
{
	union {
		char b[256];
		struct cmsghdr align;
	} ctl;
	memset(ctl.b, 0x55, sizeof ctl.b);
	socklen_t l = room;
	errno = 0;
	int r = getsockopt(fd, IPPROTO_IP, IP_PKTOPTIONS, ctl.b, &l);
	printf("%s: IP_PKTOPTIONS %d %s, length %u\n", what, r, r ? errname(errno) : "", r ? 0 : l);
	if (r)
		return;
	struct msghdr m = { 0 };
	m.msg_control = ctl.b;
	m.msg_controllen = l;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		printf("  %d/%d len %zu", c->cmsg_level, c->cmsg_type, (size_t)c->cmsg_len);
		if (c->cmsg_type == IP_PKTINFO && c->cmsg_len == CMSG_LEN(sizeof(struct in_pktinfo))) {
			struct in_pktinfo pi;
			memcpy(&pi, CMSG_DATA(c), sizeof pi);
			printf(" ifindex %d, loopback: %s", pi.ipi_ifindex,
			       pi.ipi_addr.s_addr == htonl(INADDR_LOOPBACK) &&
					       pi.ipi_spec_dst.s_addr == htonl(INADDR_LOOPBACK)
				       ? "yes"
				       : "no");
		} else if (c->cmsg_len == CMSG_LEN(sizeof(int))) {
			int v;
			memcpy(&v, CMSG_DATA(c), sizeof v);
			printf(" value %#x", v);
		}
		printf("\n");
	}
}

static void v6(void)
{
	int ls = socket(AF_INET6, SOCK_STREAM, 0);
	EXPECT(geti(ls, IPPROTO_IPV6, IPV6_TCLASS), 0);
	EXPECT(seti(ls, IPPROTO_IPV6, IPV6_TCLASS, 0x2d), 0);
	EXPECT(geti(ls, IPPROTO_IPV6, IPV6_TCLASS), 0x2c);
	EXPECT(seti(ls, IPPROTO_IPV6, IPV6_TCLASS, -1), 0);
	EXPECT(geti(ls, IPPROTO_IPV6, IPV6_TCLASS), 0);
	EXPECT_ERR(seti(ls, IPPROTO_IPV6, IPV6_TCLASS, 256), EINVAL);
	EXPECT_ERR(seti(ls, IPPROTO_IPV6, IPV6_TCLASS, -2), EINVAL);
	EXPECT(seti(ls, IPPROTO_IPV6, IPV6_TCLASS, 0x48), 0);
	EXPECT(seti(ls, IPPROTO_IP, IP_TOS, 0x28), 0);
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = in6addr_any };
	socklen_t l = sizeof a;
	EXPECT(bind(ls, (struct sockaddr *)&a, sizeof a), 0);
	EXPECT(getsockname(ls, (struct sockaddr *)&a, &l), 0);
	EXPECT(listen(ls, 2), 0);

	/* An IPv6 peer. */
	int c = socket(AF_INET6, SOCK_STREAM, 0);
	EXPECT(seti(c, IPPROTO_IPV6, IPV6_TCLASS, 0xb9), 0);
	EXPECT(geti(c, IPPROTO_IPV6, IPV6_TCLASS), 0xb8);
	struct sockaddr_in6 to = a;
	to.sin6_addr = in6addr_loopback;
	EXPECT(connect(c, (struct sockaddr *)&to, sizeof to), 0);
	int s = accept(ls, NULL, NULL);
	EXPECT_TRUE(s >= 0);
	EXPECT(geti(s, IPPROTO_IPV6, IPV6_TCLASS), 0x48);
	EXPECT(geti(s, IPPROTO_IP, IP_TOS), 0x28);
	EXPECT(geti(c, IPPROTO_IPV6, IPV6_TCLASS), 0xb8);
	flows(c, s);
	EXPECT(seti(s, IPPROTO_IPV6, IPV6_TCLASS, 0x10), 0);
	EXPECT(seti(c, IPPROTO_IPV6, IPV6_TCLASS, 0), 0);
	EXPECT(geti(s, IPPROTO_IPV6, IPV6_TCLASS), 0x10);
	flows(c, s);
	close(s);
	close(c);

	/* An IPv4 peer of the dual-stack listener. */
	int c4 = socket(AF_INET, SOCK_STREAM, 0);
	EXPECT(seti(c4, IPPROTO_IP, IP_TOS, 0x63), 0);
	EXPECT(geti(c4, IPPROTO_IP, IP_TOS), 0x60);
	struct sockaddr_in to4 = { .sin_family = AF_INET, .sin_port = a.sin6_port };
	to4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	EXPECT(connect(c4, (struct sockaddr *)&to4, sizeof to4), 0);
	s = accept(ls, NULL, NULL);
	EXPECT_TRUE(s >= 0);
	EXPECT(geti(s, IPPROTO_IP, IP_TOS), 0x28);
	EXPECT(geti(s, IPPROTO_IPV6, IPV6_TCLASS), 0x48);
	EXPECT(seti(s, IPPROTO_IP, IP_RECVTOS, 1), 0);
	EXPECT(seti(s, IPPROTO_IP, IP_PKTINFO, 1), 0);
	pktoptions("dual-stack listener's IPv4 peer", s, 256);
	flows(c4, s);
	EXPECT(seti(s, IPPROTO_IP, IP_TOS, 0x88), 0);
	EXPECT(geti(s, IPPROTO_IP, IP_TOS), 0x88);
	flows(c4, s);
	close(s);
	close(c4);
	close(ls);
}

static void v4(void)
{
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof a;
	EXPECT(bind(ls, (struct sockaddr *)&a, sizeof a), 0);
	EXPECT(getsockname(ls, (struct sockaddr *)&a, &l), 0);
	pktoptions("listener, nothing asked", ls, 256);
	EXPECT(seti(ls, IPPROTO_IP, IP_PKTINFO, 1), 0);
	EXPECT(seti(ls, IPPROTO_IP, IP_RECVTTL, 1), 0);
	EXPECT(seti(ls, IPPROTO_IP, IP_RECVTOS, 1), 0);
	EXPECT(seti(ls, IPPROTO_IP, IP_TOS, 0x28), 0);
	pktoptions("listener", ls, 256);
	EXPECT(listen(ls, 1), 0);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	EXPECT(seti(c, IPPROTO_IP, IP_TOS, 0xb8), 0);
	EXPECT(seti(c, IPPROTO_IP, IP_TTL, 33), 0);
	EXPECT(seti(c, IPPROTO_IP, IP_PKTINFO, 1), 0);
	EXPECT(seti(c, IPPROTO_IP, IP_RECVTTL, 1), 0);
	EXPECT(seti(c, IPPROTO_IP, IP_RECVTOS, 1), 0);
	EXPECT(connect(c, (struct sockaddr *)&a, sizeof a), 0);
	int s = accept(ls, NULL, NULL);
	EXPECT_TRUE(s >= 0);
	/* Later changes leave the handshake's values. */
	EXPECT(seti(c, IPPROTO_IP, IP_TOS, 0x10), 0);
	flows(c, s);
	pktoptions("accepted", s, 256);
	pktoptions("accepted, 30 bytes of room", s, 30);
	pktoptions("accepted, no room", s, 0);
	pktoptions("client", c, 256);
	EXPECT(geti(s, IPPROTO_IP, IP_MULTICAST_TTL), 33);
	EXPECT(geti(s, IPPROTO_IP, IP_TOS), 0x28);
	int u = socket(AF_INET, SOCK_DGRAM, 0);
	pktoptions("udp", u, 256);
	close(u);
	close(s);
	close(c);
	close(ls);
}

int main(void)
{
	v4();
	v6();
	return t_done();
}
