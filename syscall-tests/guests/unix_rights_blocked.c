/* Unix sockets: descriptors passed with SCM_RIGHTS by a sender that has to
 * wait for buffer room go with the first byte of their message, as Linux
 * attaches them to the first skb it queues (unix_stream_sendmsg,
 * unix_dgram_sendmsg); the wait must not lose them (issue 7). The reader
 * drains slowly, so the sender sleeps before any byte of its message is
 * queued. Buffer sizes differ between runs: only facts are printed. */
#include "t.h"
#include <sys/socket.h>
#include <time.h>

#define MSG_LEN 20000

static char buf[1 << 16];

/* Nonblocking 1000-byte writes until EAGAIN; the bytes queued. */
static long fill(int w, int type)
{
	long total = 0;
	memset(buf, 'f', sizeof buf);
	for (;;) {
		ssize_t n = send(w, buf, 1000, MSG_DONTWAIT);
		if (n < 0) {
			if (errno != EAGAIN)
				printf("send: %s\n", errname(errno));
			return total;
		}
		total += n;
		if (total > (16L << 20) || (type != SOCK_STREAM && total > 4000000))
			return total;
	}
}

static void nap(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Sends `len` bytes of 'X' with `fd` attached, blocking. */
static ssize_t send_with_fd(int s, int fd, size_t len)
{
	static char data[MSG_LEN];
	memset(data, 'X', sizeof data);
	struct iovec iov = { data, len };
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} c;
	memset(&c, 0, sizeof c);
	struct msghdr m = { 0 };
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = c.b;
	m.msg_controllen = sizeof c.b;
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof fd);
	return sendmsg(s, &m, 0);
}

struct got {
	long total;	 /* bytes read */
	long fds;	 /* descriptors received, all reads */
	long fd_reads;	 /* reads that brought descriptors */
	long fd_from;	 /* the bytes [fd_from, fd_to) came with them */
	long fd_to;
	int fd;		 /* the (last) descriptor received */
	int ctrunc;
};

/* One recvmsg of at most `max` bytes; notes descriptors. */
static ssize_t recv_one(int s, size_t max, struct got *g)
{
	struct iovec iov = { buf, max };
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(4 * sizeof(int))];
	} c;
	struct msghdr m = { 0 };
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = c.b;
	m.msg_controllen = sizeof c.b;
	ssize_t n = recvmsg(s, &m, 0);
	if (n <= 0)
		return n;
	if (m.msg_flags & MSG_CTRUNC)
		g->ctrunc = 1;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		g->fds += k;
		g->fd_reads++;
		g->fd_from = g->total;
		g->fd_to = g->total + n;
		memcpy(&g->fd, CMSG_DATA(h), sizeof(int));
	}
	g->total += n;
	return n;
}

/* A pipe whose read end holds "hello"; returns the read end. */
static int hello_pipe(void)
{
	int p[2];
	if (pipe(p) < 0)
		return -1;
	if (write(p[1], "hello", 5) != 5)
		return -1;
	close(p[1]);
	return p[0];
}

static void run(int type, const char *name, size_t len)
{
	int sv[2];
	printf("-- %s, a message of %zu bytes\n", name, len);
	if (socketpair(AF_UNIX, type, 0, sv) < 0) {
		printf("socketpair: %s\n", errname(errno));
		t_failures++;
		return;
	}
	long filler = fill(sv[0], type);
	EXPECT_TRUE(filler > 0);
	int rd = hello_pipe();
	EXPECT_TRUE(rd >= 0);
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[1]);
		ssize_t n = send_with_fd(sv[0], rd, len);
		_exit(n == (ssize_t)len ? 0 : 1);
	}
	close(rd);
	/* The sender waits for room: after a while it has not finished. */
	nap(200);
	int status = 0;
	EXPECT(waitpid(pid, &status, WNOHANG), 0);
	struct got g = { 0 };
	g.fd = -1;
	/* Drain slowly, in reads smaller than a message. */
	long want = filler + (long)len;
	while (g.total < want) {
		ssize_t n = recv_one(sv[1], type == SOCK_STREAM ? 700 : sizeof buf, &g);
		if (n <= 0) {
			printf("recvmsg: %s\n", n < 0 ? errname(errno) : "EOF");
			t_failures++;
			break;
		}
		if (g.total < filler)
			nap(1);
	}
	EXPECT_TRUE(waitpid(pid, &status, 0) == pid);
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	EXPECT_TRUE(g.total == want);
	EXPECT_TRUE(g.fds == 1);
	EXPECT_TRUE(g.fd_reads == 1);
	EXPECT_TRUE(!g.ctrunc);
	/* They came with the read that held the message's first byte. */
	EXPECT_TRUE(g.fd_from <= filler && filler < g.fd_to);
	/* And the descriptor works: the pipe's bytes are there. */
	char h[8] = { 0 };
	EXPECT(read(g.fd, h, sizeof h), 5);
	EXPECT_TRUE(memcmp(h, "hello", 5) == 0);
	close(g.fd);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	run(SOCK_STREAM, "stream", 1);
	run(SOCK_STREAM, "stream", MSG_LEN);
	run(SOCK_SEQPACKET, "seqpacket", 100);
	run(SOCK_DGRAM, "datagram", 100);
	return t_done();
}
