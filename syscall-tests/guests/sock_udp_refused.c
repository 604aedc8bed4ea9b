/* A UDP datagram to a loopback port nobody listens on (issue 7): the ICMP
 * port unreachable makes a connected socket's next send or receive fail
 * with ECONNREFUSED once (SO_ERROR reports and clears it, poll shows
 * POLLERR, not POLLIN); an unconnected socket hears nothing unless it
 * asked for IP_RECVERR, which also queues the error for MSG_ERRQUEUE:
 * the quoted payload, the destination as msg_name, and an IP_RECVERR
 * (IPV6_RECVERR) message with sock_extended_err and the offender. */
#include "t.h"
#include <arpa/inet.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* A loopback address of `family` with a port nobody is bound to. */
static socklen_t free_port(int family, struct sockaddr_storage *st)
{
	memset(st, 0, sizeof *st);
	socklen_t l;
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)st;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		l = sizeof *a;
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)st;
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		l = sizeof *a;
	}
	int s = socket(family, SOCK_DGRAM, 0);
	EXPECT(bind(s, (struct sockaddr *)st, l), 0);
	EXPECT(getsockname(s, (struct sockaddr *)st, &l), 0);
	close(s);
	return l;
}

static void show_poll(int fd)
{
	struct pollfd p = { fd, POLLIN | POLLOUT, 0 };
	EXPECT(poll(&p, 1, 0), 1);
	printf("  poll:%s%s%s\n", p.revents & POLLIN ? " IN" : "", p.revents & POLLOUT ? " OUT" : "",
	       p.revents & POLLERR ? " ERR" : "");
}

static void show_so_error(int fd)
{
	int v = -1;
	socklen_t l = sizeof v;
	EXPECT(getsockopt(fd, SOL_SOCKET, SO_ERROR, &v, &l), 0);
	printf("  SO_ERROR: %s\n", errname(v));
}

static void connected(int family)
{
	struct sockaddr_storage st;
	socklen_t l = free_port(family, &st);
	int fd = socket(family, SOCK_DGRAM, 0);
	char b[8];
	printf("%s connected\n", family == AF_INET ? "udp4" : "udp6");
	EXPECT(connect(fd, (struct sockaddr *)&st, l), 0);
	EXPECT(send(fd, "hello", 5, 0), 5);
	show_poll(fd);
	EXPECT_ERR(send(fd, "hello", 5, 0), ECONNREFUSED);
	/* Reported once. */
	show_poll(fd);
	EXPECT(send(fd, "hello", 5, 0), 5);
	show_so_error(fd);
	show_so_error(fd);
	EXPECT(send(fd, "hello", 5, 0), 5);
	EXPECT_ERR(recv(fd, b, sizeof b, MSG_DONTWAIT), ECONNREFUSED);
	EXPECT_ERR(recv(fd, b, sizeof b, MSG_DONTWAIT), EAGAIN);
	/* Nothing was queued without IP_RECVERR. */
	struct iovec iov = { b, sizeof b };
	struct msghdr m = { 0 };
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	EXPECT_ERR(recvmsg(fd, &m, MSG_ERRQUEUE), EAGAIN);
	close(fd);
}

static void unconnected(int family, int recverr)
{
	struct sockaddr_storage st;
	socklen_t l = free_port(family, &st);
	int fd = socket(family, SOCK_DGRAM, 0);
	int level = family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6;
	int name = family == AF_INET ? IP_RECVERR : IPV6_RECVERR;
	printf("%s unconnected, %s\n", family == AF_INET ? "udp4" : "udp6",
	       recverr ? "IP_RECVERR" : "no IP_RECVERR");
	if (recverr) {
		int one = 1, v = -1;
		socklen_t vl = sizeof v;
		EXPECT(setsockopt(fd, level, name, &one, sizeof one), 0);
		EXPECT(getsockopt(fd, level, name, &v, &vl), 0);
		printf("  RECVERR reads %d\n", v);
	}
	EXPECT(sendto(fd, "hello", 5, 0, (struct sockaddr *)&st, l), 5);
	show_poll(fd);
	if (recverr)
		EXPECT_ERR(sendto(fd, "hello", 5, 0, (struct sockaddr *)&st, l), ECONNREFUSED);
	else
		EXPECT(sendto(fd, "hello", 5, 0, (struct sockaddr *)&st, l), 5);
	show_poll(fd);
	show_so_error(fd);

	char data[16];
	union {
		char b[256];
		struct cmsghdr align;
	} ctl;
	struct sockaddr_storage name_buf;
	for (int round = 0; round < 3; round++) {
		struct iovec iov = { data, sizeof data };
		struct msghdr m = { 0 };
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		m.msg_name = &name_buf;
		m.msg_namelen = sizeof name_buf;
		m.msg_control = ctl.b;
		m.msg_controllen = sizeof ctl.b;
		memset(&name_buf, 0, sizeof name_buf);
		long n = recvmsg(fd, &m, MSG_ERRQUEUE | (round == 0 ? MSG_PEEK : 0));
		if (n < 0) {
			printf("  errqueue %d: %s\n", round, errname(errno));
			continue;
		}
		printf("  errqueue %d: %ld bytes \"%.*s\" flags:%s%s name same as dest: %s\n", round, n,
		       (int)n, data, m.msg_flags & MSG_ERRQUEUE ? " MSG_ERRQUEUE" : "",
		       m.msg_flags & MSG_TRUNC ? " MSG_TRUNC" : "",
		       m.msg_namelen == l && memcmp(&name_buf, &st, l) == 0 ? "yes" : "no");
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
			printf("  cmsg level=%d type=%d len=%zu", c->cmsg_level, c->cmsg_type,
			       (size_t)c->cmsg_len);
			if (c->cmsg_len >= CMSG_LEN(sizeof(struct sock_extended_err))) {
				struct sock_extended_err e;
				memcpy(&e, CMSG_DATA(c), sizeof e);
				char a[64] = "?";
				struct sockaddr_storage off;
				size_t ol = c->cmsg_len - CMSG_LEN(sizeof e);
				memset(&off, 0, sizeof off);
				memcpy(&off, CMSG_DATA(c) + sizeof e, ol < sizeof off ? ol : sizeof off);
				if (off.ss_family == AF_INET)
					inet_ntop(AF_INET, &((struct sockaddr_in *)&off)->sin_addr, a, sizeof a);
				else if (off.ss_family == AF_INET6)
					inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&off)->sin6_addr, a, sizeof a);
				printf(" errno=%s origin=%u type=%u code=%u pad=%u info=%u data=%u offender=%s",
				       errname(e.ee_errno), e.ee_origin, e.ee_type, e.ee_code, e.ee_pad,
				       e.ee_info, e.ee_data, a);
			}
			printf("\n");
		}
		show_so_error(fd);
	}
	show_poll(fd);
	if (recverr) {
		/* recvfrom takes from the queue too: data and destination. */
		EXPECT(sendto(fd, "again", 5, 0, (struct sockaddr *)&st, l), 5);
		socklen_t nl = sizeof name_buf;
		memset(&name_buf, 0, sizeof name_buf);
		long n = recvfrom(fd, data, 3, MSG_ERRQUEUE, (struct sockaddr *)&name_buf, &nl);
		printf("  recvfrom errqueue: %ld \"%.*s\" name same as dest: %s\n", n, n > 0 ? (int)n : 0,
		       data, nl == l && memcmp(&name_buf, &st, l) == 0 ? "yes" : "no");
		EXPECT_ERR(recvfrom(fd, data, sizeof data, MSG_ERRQUEUE, NULL, NULL), EAGAIN);
		show_so_error(fd);
	}
	close(fd);
}

int main(void)
{
	connected(AF_INET);
	connected(AF_INET6);
	unconnected(AF_INET, 0);
	unconnected(AF_INET, 1);
	unconnected(AF_INET6, 1);
	return t_done();
}
