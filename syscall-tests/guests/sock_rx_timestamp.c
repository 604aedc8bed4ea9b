/* SO_TIMESTAMP / SO_TIMESTAMPNS on UDP report when a datagram arrived,
 * not when it was read (issue 7): two datagrams sent 100 ms apart and
 * read together after another 100 ms carry stamps within their own send
 * windows, 100 ms apart; MSG_PEEK reports the same stamp as the read
 * that follows. Times are printed as facts only. */
#include "t.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

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

/* Receives one datagram and returns its stamp in ns (-1 if none). */
static long long stamp(int fd, int flags, int micro)
{
	char data[8];
	union {
		char b[128];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { data, sizeof data };
	struct msghdr m = { 0 };
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctl.b;
	m.msg_controllen = sizeof ctl.b;
	if (recvmsg(fd, &m, flags) < 0)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET)
			continue;
		if (micro && c->cmsg_type == SO_TIMESTAMP) {
			struct timeval tv;
			memcpy(&tv, CMSG_DATA(c), sizeof tv);
			return (long long)tv.tv_sec * 1000000000LL + tv.tv_usec * 1000LL;
		}
		if (!micro && c->cmsg_type == SO_TIMESTAMPNS) {
			struct timespec ts;
			memcpy(&ts, CMSG_DATA(c), sizeof ts);
			return ns(ts);
		}
	}
	return -1;
}

static void run(int family, int micro)
{
	int rx = socket(family, SOCK_DGRAM, 0), tx = socket(family, SOCK_DGRAM, 0);
	struct sockaddr_storage st = { 0 };
	socklen_t l;
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&st;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		l = sizeof *a;
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&st;
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		l = sizeof *a;
	}
	if (bind(rx, (struct sockaddr *)&st, l) < 0) {
		printf("bind: %s\n", errname(errno));
		return;
	}
	EXPECT(getsockname(rx, (struct sockaddr *)&st, &l), 0);
	int one = 1;
	EXPECT(setsockopt(rx, SOL_SOCKET, micro ? SO_TIMESTAMP : SO_TIMESTAMPNS, &one, sizeof one), 0);
	/* Microsecond stamps: compare at microsecond precision. */
	long long q = micro ? 1000 : 1;
	struct timespec b1 = now();
	EXPECT(sendto(tx, "one", 3, 0, (struct sockaddr *)&st, l), 3);
	struct timespec a1 = now();
	pause_ms(100);
	struct timespec b2 = now();
	EXPECT(sendto(tx, "two", 3, 0, (struct sockaddr *)&st, l), 3);
	struct timespec a2 = now();
	pause_ms(100);
	long long peek = stamp(rx, MSG_PEEK, micro);
	long long s1 = stamp(rx, 0, micro), s2 = stamp(rx, 0, micro);
	printf("%s %s: first within its send: %s, second within its send: %s\n",
	       family == AF_INET ? "udp4" : "udp6", micro ? "SO_TIMESTAMP" : "SO_TIMESTAMPNS",
	       ns(b1) / q * q <= s1 && s1 <= ns(a1) ? "yes" : "no",
	       ns(b2) / q * q <= s2 && s2 <= ns(a2) ? "yes" : "no");
	printf("  peek same as read: %s, apart by at least 100 ms: %s\n", peek == s1 ? "yes" : "no",
	       s2 - s1 >= 100000000LL - q ? "yes" : "no");
	close(rx);
	close(tx);
}

int main(void)
{
	/* Linux turns receive stamping on for the whole system a moment
	 * after the first socket asks (a deferred static key); until then
	 * datagrams are stamped when read. A socket asking first, and a
	 * pause, keep the native run honest. */
	int warm = socket(AF_INET, SOCK_DGRAM, 0), one = 1;
	EXPECT(setsockopt(warm, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one), 0);
	pause_ms(200);
	run(AF_INET, 0);
	run(AF_INET, 1);
	run(AF_INET6, 0);
	run(AF_INET6, 1);
	close(warm);
	return t_done();
}
