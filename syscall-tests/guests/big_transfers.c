/* Large single transfers: one 64 MiB write or send through a pipe, a Unix
 * stream socket pair, a TCP loopback connection and a /tmp file arrives
 * whole and intact (counts and checksums); MSG_WAITALL fills 64 MiB in one
 * call; a read of far more than a small file holds returns the file; a
 * datagram too large for the socket is EMSGSIZE (Unix: above SO_SNDBUF,
 * UDP: above 65535) and one that fits arrives whole; getrandom of 1 MiB. */
#include "t.h"
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define BIG (64L << 20)

static unsigned char *src, *dst;

static unsigned long long sum(const unsigned char *p, long n)
{
	unsigned long long h = 1469598103934665603ULL;
	for (long i = 0; i < n; i += 8) {
		unsigned long long w;
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 1099511628211ULL;
	}
	return h;
}

static unsigned char *map(long n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* A child that writes all of `src` to `fd` with one call (`how`: 0 write,
 * 1 send, 2 sendmsg over three iovecs), exiting 0 when the call's count
 * was the whole length. */
static pid_t writer(int fd, int how)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	ssize_t n;
	if (how == 0) {
		n = write(fd, src, BIG);
	} else if (how == 1) {
		n = send(fd, src, BIG, 0);
	} else {
		struct iovec iov[3] = {
			{ src, 12345 },
			{ src + 12345, BIG / 2 },
			{ src + 12345 + BIG / 2, BIG - 12345 - BIG / 2 },
		};
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = 3 };
		n = sendmsg(fd, &m, 0);
	}
	_exit(n == BIG ? 0 : 1);
}

/* Reads until `BIG` bytes or end of file; returns the count. */
static long read_all(int fd)
{
	long got = 0;
	while (got < BIG) {
		ssize_t n = read(fd, dst + got, BIG - got);
		if (n <= 0)
			break;
		got += n;
	}
	return got;
}

static int child_ok(pid_t pid)
{
	int st = 0;
	return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(void)
{
	src = map(BIG);
	dst = map(BIG);
	EXPECT_TRUE(src && dst);
	if (!src || !dst)
		return t_done();
	unsigned long long x = 88172645463325252ULL;
	for (long i = 0; i < BIG; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(src + i, &x, 8);
	}
	unsigned long long want = sum(src, BIG);

	/* A pipe: the writer sleeps until everything is in. */
	int p[2];
	EXPECT(pipe(p), 0);
	pid_t w = writer(p[1], 0);
	close(p[1]);
	memset(dst, 0, BIG);
	EXPECT(read_all(p[0]), BIG);
	EXPECT_TRUE(sum(dst, BIG) == want);
	EXPECT_TRUE(child_ok(w));
	close(p[0]);

	/* A Unix stream pair, written with write and with sendmsg; read with
	 * read, then with one MSG_WAITALL recv. */
	int s[2];
	EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0);
	w = writer(s[0], 0);
	memset(dst, 0, BIG);
	EXPECT(read_all(s[1]), BIG);
	EXPECT_TRUE(sum(dst, BIG) == want);
	EXPECT_TRUE(child_ok(w));
	w = writer(s[0], 2);
	memset(dst, 0, BIG);
	EXPECT(recv(s[1], dst, BIG, MSG_WAITALL), BIG);
	EXPECT_TRUE(sum(dst, BIG) == want);
	EXPECT_TRUE(child_ok(w));
	close(s[0]);
	close(s[1]);

	/* Unix datagrams go whole or not at all: above the send buffer,
	 * EMSGSIZE; 100000 bytes fit and arrive as one message. */
	int d[2];
	EXPECT(socketpair(AF_UNIX, SOCK_DGRAM, 0, d), 0);
	EXPECT_ERR(send(d[0], src, 8 << 20, 0), EMSGSIZE);
	EXPECT(send(d[0], src, 100000, 0), 100000);
	memset(dst, 0, 100000);
	EXPECT(recv(d[1], dst, BIG, 0), 100000);
	EXPECT_TRUE(memcmp(dst, src, 100000) == 0);
	close(d[0]);
	close(d[1]);
	EXPECT(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, d), 0);
	EXPECT_ERR(send(d[0], src, 8 << 20, 0), EMSGSIZE);
	close(d[0]);
	close(d[1]);

	/* TCP over loopback, written with send; read with read. */
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof a;
	EXPECT(bind(l, (struct sockaddr *)&a, sizeof a), 0);
	EXPECT(listen(l, 1), 0);
	EXPECT(getsockname(l, (struct sockaddr *)&a, &alen), 0);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	EXPECT(connect(c, (struct sockaddr *)&a, sizeof a), 0);
	int acc = accept(l, NULL, NULL);
	EXPECT_TRUE(acc >= 0);
	w = writer(c, 1);
	close(c);
	memset(dst, 0, BIG);
	EXPECT(read_all(acc), BIG);
	EXPECT_TRUE(sum(dst, BIG) == want);
	EXPECT_TRUE(child_ok(w));
	close(acc);
	close(l);

	/* UDP: more than 65535 bytes is EMSGSIZE before anything else. */
	int u = socket(AF_INET, SOCK_DGRAM, 0);
	a.sin_port = htons(9);
	EXPECT_ERR(sendto(u, src, 1 << 20, 0, (struct sockaddr *)&a, sizeof a), EMSGSIZE);
	EXPECT_ERR(sendto(u, src, 65536, 0, (struct sockaddr *)&a, sizeof a), EMSGSIZE);
	close(u);

	/* A file in /tmp (tmpfs in the sandbox): one write, one pread, one
	 * writev, and reads asking for far more than there is. */
	char name[64];
	snprintf(name, sizeof name, "/tmp/big_transfers.%d", getpid());
	int f = open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);
	EXPECT_TRUE(f >= 0);
	unlink(name);
	EXPECT(write(f, src, BIG), BIG);
	memset(dst, 0, BIG);
	EXPECT(pread(f, dst, BIG, 0), BIG);
	EXPECT_TRUE(sum(dst, BIG) == want);
	struct iovec iov[2] = { { src, BIG / 4 }, { src + BIG / 4, BIG / 4 } };
	EXPECT(pwritev(f, iov, 2, BIG), BIG / 2);
	EXPECT(lseek(f, 0, SEEK_END), BIG + BIG / 2);
	memset(dst, 0, BIG);
	EXPECT(pread(f, dst, BIG, BIG), BIG / 2);
	EXPECT_TRUE(memcmp(dst, src, BIG / 2) == 0);
	EXPECT(ftruncate(f, 1000), 0);
	EXPECT(lseek(f, 0, SEEK_SET), 0);
	EXPECT(read(f, dst, BIG), 1000);
	EXPECT(read(f, dst, BIG), 0);
	EXPECT_TRUE(memcmp(dst, src, 1000) == 0);
	close(f);

	/* getrandom: 1 MiB in one call. */
	memset(dst, 0, 1 << 20);
	EXPECT(getrandom(dst, 1 << 20, 0), 1 << 20);
	EXPECT_TRUE(sum(dst, 1 << 20) != sum(src + BIG - (1 << 20), 1 << 20));
	return t_done();
}
