/* recvmmsg(2)'s timeout as Linux applies it (do_recvmmsg): checked only
 * after each datagram, so a wait for a datagram is not cut short by it
 * (recvmmsg(2), BUGS) but once it has passed the call returns what it
 * has; the time left written back when a datagram came (zero once over),
 * left alone on an error; EINVAL for a malformed timeout, EFAULT for an
 * unreadable one. Also SO_RCVTIMEO on a netlink route socket: a blocking
 * receive with nothing to read ends in EAGAIN after the timeout. Times are
 * printed only as coarse yes/no facts. */
#include "t.h"
#include <arpa/inet.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>

#define VLEN 5

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static char bufs[VLEN][64];
static struct iovec iovs[VLEN];
static struct mmsghdr msgs[VLEN];

static void reset(void)
{
	memset(msgs, 0, sizeof msgs);
	for (int i = 0; i < VLEN; i++) {
		iovs[i].iov_base = bufs[i];
		iovs[i].iov_len = sizeof bufs[i];
		msgs[i].msg_hdr.msg_iov = &iovs[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
}

static int mm(int fd, unsigned vlen, int flags, struct timespec *ts)
{
	reset();
	return syscall(SYS_recvmmsg, fd, msgs, vlen, flags, ts);
}

static void show(const char *what, int n)
{
	printf("%s: %d", what, n);
	for (int i = 0; i < n; i++)
		printf(" [%u %.*s]", msgs[i].msg_len, (int)msgs[i].msg_len, bufs[i]);
	printf("\n");
}

static void send_n(int fd, const struct sockaddr *to, socklen_t tl, int n, char tag)
{
	for (int i = 0; i < n; i++) {
		char d[8];
		int l = snprintf(d, sizeof d, "%c%d", tag, i);
		if (sendto(fd, d, l, 0, to, tl) != l)
			t_fail("sendto");
	}
}

static void udp_pair(int *rx, int *tx, struct sockaddr_in *a)
{
	socklen_t l = sizeof *a;
	*rx = socket(AF_INET, SOCK_DGRAM, 0);
	*tx = socket(AF_INET, SOCK_DGRAM, 0);
	memset(a, 0, sizeof *a);
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	EXPECT(bind(*rx, (struct sockaddr *)a, sizeof *a), 0);
	EXPECT(getsockname(*rx, (struct sockaddr *)a, &l), 0);
}

static void udp(void)
{
	int rx, tx;
	struct sockaddr_in a;
	udp_pair(&rx, &tx, &a);
	const struct sockaddr *to = (struct sockaddr *)&a;

	/* Everything queued comes, and what is left of the timeout is
	 * written back. */
	send_n(tx, to, sizeof a, 3, 'a');
	struct timespec ts = { 5, 0 };
	int n = mm(rx, VLEN, MSG_DONTWAIT, &ts);
	show("three queued, 5s timeout", n);
	printf("  time left in (4s, 5s): %s\n",
	       ts.tv_sec == 4 && ts.tv_nsec > 0 ? "yes" : "no");

	/* A zero timeout is over after the first datagram. */
	send_n(tx, to, sizeof a, 3, 'b');
	ts = (struct timespec){ 0, 0 };
	n = mm(rx, VLEN, 0, &ts);
	show("three queued, zero timeout", n);
	printf("  time left: %ld.%09ld\n", (long)ts.tv_sec, ts.tv_nsec);
	n = mm(rx, VLEN, MSG_DONTWAIT, NULL);
	show("the rest, no timeout", n);

	/* Nothing there: the error, and the timeout left alone. */
	ts = (struct timespec){ 7, 0 };
	n = mm(rx, VLEN, MSG_DONTWAIT, &ts);
	printf("empty queue: %d %s, timeout %ld.%09ld\n", n, errname(errno),
	       (long)ts.tv_sec, ts.tv_nsec);

	/* Malformed or unreadable timeouts. */
	send_n(tx, to, sizeof a, 1, 'c');
	ts = (struct timespec){ 0, 1000000000 };
	EXPECT_ERR(mm(rx, VLEN, MSG_DONTWAIT, &ts), EINVAL);
	ts = (struct timespec){ -1, 0 };
	EXPECT_ERR(mm(rx, VLEN, MSG_DONTWAIT, &ts), EINVAL);
	ts = (struct timespec){ 0, -1 };
	EXPECT_ERR(mm(rx, VLEN, MSG_DONTWAIT, &ts), EINVAL);
	EXPECT_ERR(mm(rx, VLEN, MSG_DONTWAIT, BADPTR), EFAULT);
	n = mm(rx, VLEN, MSG_DONTWAIT, NULL);
	show("still queued after the refusals", n);

	/* The timeout does not end a wait: one datagram is there, the next
	 * comes 0.7 s later, well past the 0.3 s timeout, and is still
	 * received; then the timeout is over and the call returns without
	 * waiting for the third. */
	send_n(tx, to, sizeof a, 1, 'd');
	pid_t pid = fork();
	if (pid == 0) {
		usleep(700000);
		send_n(tx, to, sizeof a, 1, 'e');
		usleep(100000);
		send_n(tx, to, sizeof a, 1, 'f');
		_exit(0);
	}
	ts = (struct timespec){ 0, 300000000 };
	double t0 = now();
	n = mm(rx, 3, 0, &ts);
	double el = now() - t0;
	show("one queued, one 0.7s later, 0.3s timeout", n);
	printf("  waited >= 0.5s: %s\n", el >= 0.5 ? "yes" : "no");
	printf("  time left: %ld.%09ld\n", (long)ts.tv_sec, ts.tv_nsec);
	int st;
	waitpid(pid, &st, 0);
	n = mm(rx, 1, 0, NULL);
	show("the third, afterwards", n);
	close(rx);
	close(tx);
}

static void unix_dgram(void)
{
	int sv[2];
	EXPECT(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
	send(sv[1], "u0", 2, 0);
	send(sv[1], "u1", 2, 0);
	struct timespec ts = { 1, 0 };
	int n = mm(sv[0], VLEN, MSG_DONTWAIT, &ts);
	show("unix: two queued, 1s timeout", n);
	printf("  time left in (0s, 1s): %s\n", ts.tv_sec == 0 && ts.tv_nsec > 0 ? "yes" : "no");
	/* MSG_WAITFORONE: the first may wait, the rest may not. */
	send(sv[1], "u2", 2, 0);
	n = mm(sv[0], VLEN, MSG_WAITFORONE, &ts);
	show("unix: MSG_WAITFORONE", n);
	close(sv[0]);
	close(sv[1]);
}

static void netlink(void)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0) {
		t_fail("netlink socket");
		return;
	}
	struct timeval tv = { 0, 300000 };
	socklen_t len = sizeof tv;
	EXPECT(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
	memset(&tv, 0, sizeof tv);
	EXPECT(getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &len), 0);
	printf("netlink SO_RCVTIMEO: len=%u %ld.%06ld\n", len, (long)tv.tv_sec, (long)tv.tv_usec);
	len = sizeof tv;
	EXPECT(getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &len), 0);
	printf("netlink SO_SNDTIMEO: len=%u %ld.%06ld\n", len, (long)tv.tv_sec, (long)tv.tv_usec);
	tv = (struct timeval){ 0, 1000000 };
	EXPECT_ERR(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), EDOM);
	EXPECT_ERR(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, 4), EINVAL);

	char buf[8192];
	double t0 = now();
	EXPECT_ERR(recv(fd, buf, sizeof buf, 0), EAGAIN);
	double el = now() - t0;
	printf("netlink recv waited about 0.3s: %s\n", el >= 0.2 && el < 2.0 ? "yes" : "no");

	/* A request's answer is still received under the timeout. */
	struct {
		struct nlmsghdr nh;
		struct rtgenmsg g;
	} req = { { NLMSG_LENGTH(sizeof(struct rtgenmsg)), RTM_GETLINK,
		    NLM_F_REQUEST | NLM_F_DUMP, 1, 0 },
		  { AF_UNSPEC } };
	EXPECT(send(fd, &req, req.nh.nlmsg_len, 0), (long)req.nh.nlmsg_len);
	long n = recv(fd, buf, sizeof buf, 0);
	printf("netlink dump answered: %s\n", n > 0 ? "yes" : "no");
	close(fd);
}

int main(void)
{
	udp();
	unix_dgram();
	netlink();
	return t_done();
}
