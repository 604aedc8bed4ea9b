/* TCP and UDP over loopback (issue 7 point 2): the socket options programs
 * set (SO_REUSEADDR, SO_REUSEPORT, SO_KEEPALIVE, SO_RCVBUF/SO_SNDBUF,
 * SO_ERROR, SO_LINGER, TCP_NODELAY, TCP_KEEPIDLE, IPV6_V6ONLY), accept4's
 * flags, non-blocking connect, FIONREAD, getsockname/getpeername, shutdown
 * and epoll readiness. */
#include "t.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

static int getint(int fd, int level, int opt)
{
	int v = -12345;
	socklen_t len = sizeof v;
	if (getsockopt(fd, level, opt, &v, &len) < 0)
		return -1000 - errno;
	return v;
}

static int setint(int fd, int level, int opt, int v)
{
	return setsockopt(fd, level, opt, &v, sizeof v);
}

static struct sockaddr_in v4(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static uint16_t port_of(int fd)
{
	struct sockaddr_in6 a;
	socklen_t len = sizeof a;
	if (getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		return 0;
	return ntohs(a.sin6_port); /* same offset in sockaddr_in */
}

static int wait_for(int fd, short events)
{
	struct pollfd p = { fd, events, 0 };
	return poll(&p, 1, 10000) == 1 ? p.revents : 0;
}

static void options(void)
{
	SHOW("-- option defaults and round trips");
	int s = EXPECT_OK(socket(AF_INET, SOCK_STREAM, 0));
	EXPECT(getint(s, SOL_SOCKET, SO_REUSEADDR), 0);
	EXPECT(setint(s, SOL_SOCKET, SO_REUSEADDR, 1), 0);
	EXPECT(getint(s, SOL_SOCKET, SO_REUSEADDR), 1);
	EXPECT(getint(s, SOL_SOCKET, SO_REUSEPORT), 0);
	EXPECT(setint(s, SOL_SOCKET, SO_REUSEPORT, 5), 0);
	EXPECT(getint(s, SOL_SOCKET, SO_REUSEPORT), 1);
	EXPECT(getint(s, SOL_SOCKET, SO_KEEPALIVE), 0);
	EXPECT(setint(s, SOL_SOCKET, SO_KEEPALIVE, 1), 0);
	EXPECT(getint(s, SOL_SOCKET, SO_KEEPALIVE), 1);
	EXPECT(getint(s, IPPROTO_TCP, TCP_NODELAY), 0);
	EXPECT(setint(s, IPPROTO_TCP, TCP_NODELAY, 1), 0);
	EXPECT(getint(s, IPPROTO_TCP, TCP_NODELAY), 1);
	EXPECT(getint(s, IPPROTO_TCP, TCP_KEEPIDLE), 7200);
	EXPECT(setint(s, IPPROTO_TCP, TCP_KEEPIDLE, 30), 0);
	EXPECT(getint(s, IPPROTO_TCP, TCP_KEEPIDLE), 30);
	EXPECT_ERR(setint(s, IPPROTO_TCP, TCP_KEEPIDLE, 0), EINVAL);
	EXPECT_ERR(setint(s, IPPROTO_TCP, TCP_KEEPIDLE, 32768), EINVAL);
	EXPECT(getint(s, IPPROTO_TCP, TCP_KEEPINTVL), 75);
	EXPECT(getint(s, IPPROTO_TCP, TCP_KEEPCNT), 9);
	EXPECT(getint(s, SOL_SOCKET, SO_ERROR), 0);
	EXPECT(getint(s, SOL_SOCKET, SO_TYPE), SOCK_STREAM);
	EXPECT(getint(s, SOL_SOCKET, SO_ACCEPTCONN), 0);

	struct linger lg = { 0, 0 };
	socklen_t len = sizeof lg;
	EXPECT(getsockopt(s, SOL_SOCKET, SO_LINGER, &lg, &len), 0);
	EXPECT_TRUE(len == sizeof lg && lg.l_onoff == 0 && lg.l_linger == 0);
	lg.l_onoff = 1;
	lg.l_linger = 5;
	EXPECT(setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
	memset(&lg, 0, sizeof lg);
	EXPECT(getsockopt(s, SOL_SOCKET, SO_LINGER, &lg, &len), 0);
	EXPECT_TRUE(lg.l_onoff == 1 && lg.l_linger == 5);
	EXPECT_ERR(setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg - 1), EINVAL);

	/* Buffer sizes are doubled, as Linux keeps room for its books. */
	EXPECT(setint(s, SOL_SOCKET, SO_RCVBUF, 65536), 0);
	EXPECT(getint(s, SOL_SOCKET, SO_RCVBUF), 131072);
	EXPECT(setint(s, SOL_SOCKET, SO_SNDBUF, 65536), 0);
	EXPECT(getint(s, SOL_SOCKET, SO_SNDBUF), 131072);
	close(s);

	int u = EXPECT_OK(socket(AF_INET, SOCK_DGRAM, 0));
	EXPECT(getint(u, SOL_SOCKET, SO_TYPE), SOCK_DGRAM);
	EXPECT(getint(u, IPPROTO_TCP, TCP_NODELAY), -1000 - EOPNOTSUPP);
	close(u);

	int s6 = EXPECT_OK(socket(AF_INET6, SOCK_STREAM, 0));
	EXPECT(getint(s6, IPPROTO_IPV6, IPV6_V6ONLY), 0);
	EXPECT(setint(s6, IPPROTO_IPV6, IPV6_V6ONLY, 1), 0);
	EXPECT(getint(s6, IPPROTO_IPV6, IPV6_V6ONLY), 1);
	close(s6);
}

static void reuse_and_v6only(void)
{
	SHOW("-- SO_REUSEPORT");
	int a = EXPECT_OK(socket(AF_INET, SOCK_STREAM, 0));
	int b = EXPECT_OK(socket(AF_INET, SOCK_STREAM, 0));
	int c = EXPECT_OK(socket(AF_INET, SOCK_STREAM, 0));
	EXPECT(setint(a, SOL_SOCKET, SO_REUSEPORT, 1), 0);
	EXPECT(setint(b, SOL_SOCKET, SO_REUSEPORT, 1), 0);
	struct sockaddr_in sa = v4(0);
	EXPECT(bind(a, (struct sockaddr *)&sa, sizeof sa), 0);
	sa = v4(port_of(a));
	EXPECT(listen(a, 4), 0);
	EXPECT(bind(b, (struct sockaddr *)&sa, sizeof sa), 0);
	EXPECT(listen(b, 4), 0);
	/* Without the option: the port is taken. */
	EXPECT_ERR(bind(c, (struct sockaddr *)&sa, sizeof sa), EADDRINUSE);
	close(a);
	close(b);
	close(c);

	SHOW("-- IPV6_V6ONLY");
	int l4 = EXPECT_OK(socket(AF_INET, SOCK_STREAM, 0));
	sa = v4(0);
	sa.sin_addr.s_addr = htonl(INADDR_ANY);
	EXPECT(bind(l4, (struct sockaddr *)&sa, sizeof sa), 0);
	uint16_t port = port_of(l4);
	struct sockaddr_in6 any6 = { .sin6_family = AF_INET6, .sin6_port = htons(port),
				     .sin6_addr = IN6ADDR_ANY_INIT };
	int dual = EXPECT_OK(socket(AF_INET6, SOCK_STREAM, 0));
	EXPECT_ERR(bind(dual, (struct sockaddr *)&any6, sizeof any6), EADDRINUSE);
	int only = EXPECT_OK(socket(AF_INET6, SOCK_STREAM, 0));
	EXPECT(setint(only, IPPROTO_IPV6, IPV6_V6ONLY, 1), 0);
	EXPECT(bind(only, (struct sockaddr *)&any6, sizeof any6), 0);
	EXPECT(listen(only, 4), 0);
	/* A v4-mapped destination is not reachable through a v6-only socket. */
	int cl = EXPECT_OK(socket(AF_INET6, SOCK_STREAM, 0));
	EXPECT(setint(cl, IPPROTO_IPV6, IPV6_V6ONLY, 1), 0);
	struct sockaddr_in6 mapped = { .sin6_family = AF_INET6, .sin6_port = htons(port) };
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &mapped.sin6_addr);
	EXPECT_ERR(connect(cl, (struct sockaddr *)&mapped, sizeof mapped), ENETUNREACH);
	/* The option is fixed once bound. */
	EXPECT_ERR(setint(only, IPPROTO_IPV6, IPV6_V6ONLY, 0), EINVAL);
	close(cl);
	close(only);
	close(dual);
	close(l4);
}

static void connections(void)
{
	char buf[64];

	SHOW("-- listen, non-blocking connect, accept4");
	int l = EXPECT_OK(socket(AF_INET, SOCK_STREAM, 0));
	struct sockaddr_in sa = v4(0);
	EXPECT(bind(l, (struct sockaddr *)&sa, sizeof sa), 0);
	EXPECT(listen(l, 8), 0);
	EXPECT(getint(l, SOL_SOCKET, SO_ACCEPTCONN), 1);
	sa = v4(port_of(l));
	int ep = EXPECT_OK(epoll_create1(EPOLL_CLOEXEC));
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 1 };
	EXPECT(epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev), 0);
	struct epoll_event out[4];
	EXPECT(epoll_wait(ep, out, 4, 0), 0);

	int c = EXPECT_OK(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
	struct sockaddr_in peer;
	socklen_t plen = sizeof peer;
	EXPECT_ERR(getpeername(c, (struct sockaddr *)&peer, &plen), ENOTCONN);
	/* (Linux records the shutdown even so: ask another socket.) */
	int lone = EXPECT_OK(socket(AF_INET, SOCK_STREAM, 0));
	EXPECT_ERR(shutdown(lone, SHUT_RDWR), ENOTCONN);
	close(lone);
	errno = 0;
	int r = connect(c, (struct sockaddr *)&sa, sizeof sa);
	EXPECT_TRUE(r == 0 || errno == EINPROGRESS);
	EXPECT_TRUE(wait_for(c, POLLOUT) & POLLOUT);
	EXPECT(getint(c, SOL_SOCKET, SO_ERROR), 0);
	EXPECT(epoll_wait(ep, out, 4, 10000), 1);
	EXPECT_TRUE(out[0].data.u32 == 1 && (out[0].events & EPOLLIN));
	struct sockaddr_in from;
	socklen_t flen = sizeof from;
	int s = EXPECT_OK(accept4(l, (struct sockaddr *)&from, &flen, SOCK_NONBLOCK | SOCK_CLOEXEC));
	EXPECT(fcntl(s, F_GETFD), FD_CLOEXEC);
	EXPECT_TRUE(fcntl(s, F_GETFL) & O_NONBLOCK);
	EXPECT_ERR(accept4(l, NULL, NULL, 0x40000000), EINVAL);
	struct sockaddr_in me;
	socklen_t mlen = sizeof me;
	EXPECT(getsockname(c, (struct sockaddr *)&me, &mlen), 0);
	EXPECT_TRUE(flen == sizeof from && from.sin_port == me.sin_port &&
		    from.sin_addr.s_addr == me.sin_addr.s_addr);
	plen = sizeof peer;
	EXPECT(getpeername(c, (struct sockaddr *)&peer, &plen), 0);
	EXPECT_TRUE(peer.sin_port == sa.sin_port);
	/* Accepted sockets inherit the listener's options. */
	EXPECT(getint(s, IPPROTO_TCP, TCP_NODELAY), 0);

	SHOW("-- data, FIONREAD, MSG_PEEK, MSG_DONTWAIT");
	EXPECT_ERR(recv(s, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
	EXPECT(send(c, "hello", 5, 0), 5);
	EXPECT_TRUE(wait_for(s, POLLIN) & POLLIN);
	int n = -1;
	EXPECT(ioctl(s, FIONREAD, &n), 0);
	EXPECT(n, 5);
	EXPECT(recv(s, buf, 2, MSG_PEEK), 2);
	EXPECT(recv(s, buf, sizeof buf, 0), 5);
	EXPECT(memcmp(buf, "hello", 5), 0);

	SHOW("-- shutdown and EPOLLRDHUP");
	struct epoll_event ev2 = { .events = EPOLLIN | EPOLLRDHUP, .data.u32 = 2 };
	EXPECT(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev2), 0);
	EXPECT(shutdown(c, SHUT_WR), 0);
	EXPECT(epoll_wait(ep, out, 4, 10000), 1);
	EXPECT_TRUE(out[0].data.u32 == 2 && (out[0].events & EPOLLRDHUP) &&
		    (out[0].events & EPOLLIN));
	EXPECT(recv(s, buf, sizeof buf, 0), 0);
	EXPECT(send(s, "reply", 5, 0), 5);
	EXPECT_TRUE(wait_for(c, POLLIN) & POLLIN);
	EXPECT(recv(c, buf, sizeof buf, 0), 5);
	EXPECT_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
	close(s);
	close(c);
	close(ep);

	SHOW("-- a refused non-blocking connect reports through SO_ERROR");
	c = EXPECT_OK(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
	close(l); /* the port is closed now */
	errno = 0;
	r = connect(c, (struct sockaddr *)&sa, sizeof sa);
	int e = errno;
	EXPECT_TRUE(r == -1 && (e == EINPROGRESS || e == ECONNREFUSED));
	if (e == EINPROGRESS) {
		EXPECT_TRUE(wait_for(c, POLLOUT) & (POLLOUT | POLLERR));
		EXPECT(getint(c, SOL_SOCKET, SO_ERROR), ECONNREFUSED);
	} else {
		SHOW("wait_for(c, POLLOUT) & (POLLOUT | POLLERR): yes");
		SHOW("getint(c, SOL_SOCKET, SO_ERROR): ret=%d", ECONNREFUSED);
	}
	EXPECT(getint(c, SOL_SOCKET, SO_ERROR), 0);
	close(c);

	SHOW("-- UDP: FIONREAD is the next datagram's size");
	int u1 = EXPECT_OK(socket(AF_INET, SOCK_DGRAM, 0));
	int u2 = EXPECT_OK(socket(AF_INET, SOCK_DGRAM, 0));
	sa = v4(0);
	EXPECT(bind(u1, (struct sockaddr *)&sa, sizeof sa), 0);
	sa = v4(port_of(u1));
	EXPECT(sendto(u2, "1234567", 7, 0, (struct sockaddr *)&sa, sizeof sa), 7);
	EXPECT(sendto(u2, "12", 2, 0, (struct sockaddr *)&sa, sizeof sa), 2);
	EXPECT_TRUE(wait_for(u1, POLLIN) & POLLIN);
	EXPECT(ioctl(u1, FIONREAD, &n), 0);
	EXPECT(n, 7);
	EXPECT(recv(u1, buf, sizeof buf, 0), 7);
	EXPECT(recv(u1, buf, sizeof buf, 0), 2);
	close(u1);
	close(u2);
}

int main(void)
{
	options();
	reuse_and_v6only();
	connections();
	return t_done();
}
