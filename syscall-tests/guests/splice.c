/* splice(2), tee(2) and vmsplice(2): a file into a pipe and a pipe into a
 * file (offset pointers stored back, positions untouched; without them the
 * positions advance), pipe to pipe, a socket to a pipe and a pipe to a
 * socket, 1.5 MiB through a pipe into a file and from a file through a
 * pipe into a socket with checksums; tee copying without consuming;
 * vmsplice in both directions; end of file, EAGAIN (SPLICE_F_NONBLOCK or
 * O_NONBLOCK), EINTR, EPIPE with SIGPIPE; and the errors: EINVAL (flags,
 * no pipe, one pipe twice, offsets on a socket, appending output), ESPIPE
 * (offset on the pipe side), EBADF, EFAULT. */
#include "t.h"
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>

#define BIG (3L << 19)

static int sigpipes, alarms;
static void on_sig(int s) { if (s == SIGPIPE) sigpipes++; else alarms++; }

static unsigned long long sum(const unsigned char *p, long n)
{
	unsigned long long h = 1469598103934665603ULL;
	for (long i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

static int avail(int fd)
{
	int n = -1;
	ioctl(fd, FIONREAD, &n);
	return n;
}

int main(void)
{
	char dir[] = "/tmp/spliceXXXXXX", a[64], b[64];
	if (!mkdtemp(dir))
		return 99;
	struct sigaction sa = { .sa_handler = on_sig };
	sigaction(SIGPIPE, &sa, NULL);
	sigaction(SIGALRM, &sa, NULL); /* no SA_RESTART: EINTR */
	unsigned char *src = malloc(BIG), *got = malloc(BIG + 1);
	for (long i = 0; i < BIG; i++)
		src[i] = (unsigned char)(i * 5 + (i >> 10));
	snprintf(a, sizeof a, "%s/a", dir);
	snprintf(b, sizeof b, "%s/b", dir);
	int f = open(a, O_RDWR | O_CREAT | O_TRUNC, 0600);
	EXPECT(write(f, src, BIG), BIG);
	int g = open(b, O_RDWR | O_CREAT | O_TRUNC, 0600);
	int p[2], q[2];
	EXPECT(pipe(p), 0);
	EXPECT(pipe(q), 0);

	/* File to pipe: with an offset pointer, then with the position. */
	loff_t off = 10;
	EXPECT(lseek(f, 0, SEEK_SET), 0);
	EXPECT(splice(f, &off, p[1], NULL, 20, 0), 20);
	EXPECT(off, 30);
	EXPECT(lseek(f, 0, SEEK_CUR), 0);
	EXPECT(splice(f, NULL, p[1], NULL, 5, 0), 5);
	EXPECT(lseek(f, 0, SEEK_CUR), 5);
	EXPECT(avail(p[0]), 25);
	/* Pipe to file: offset pointer, then position. */
	off = 100;
	EXPECT(splice(p[0], NULL, g, &off, 20, 0), 20);
	EXPECT(off, 120);
	EXPECT(lseek(g, 0, SEEK_CUR), 0);
	EXPECT(splice(p[0], NULL, g, NULL, 100, 0), 5);
	EXPECT(lseek(g, 0, SEEK_CUR), 5);
	EXPECT(pread(g, got, 20, 100), 20);
	EXPECT_TRUE(memcmp(got, src + 10, 20) == 0);
	EXPECT(pread(g, got, 5, 0), 5);
	EXPECT_TRUE(memcmp(got, src, 5) == 0);
	/* At most what the pipe holds goes in. */
	off = 0;
	EXPECT(splice(f, &off, p[1], NULL, 100000, 0), 65536);
	EXPECT(off, 65536);
	EXPECT_ERR(splice(f, &off, p[1], NULL, 10, SPLICE_F_NONBLOCK), EAGAIN);
	/* Pipe to pipe moves: up to what the second pipe holds. */
	EXPECT(splice(p[0], NULL, q[1], NULL, 1000, 0), 1000);
	EXPECT(avail(p[0]), 64536);
	EXPECT(avail(q[0]), 1000);
	EXPECT(read(q[0], got, 1000), 1000);
	EXPECT_TRUE(memcmp(got, src, 1000) == 0);
	EXPECT(read(p[0], got, 65536), 64536);

	/* tee copies without consuming. */
	EXPECT(write(p[1], "hello", 5), 5);
	EXPECT(tee(p[0], q[1], 100, 0), 5);
	EXPECT(tee(p[0], q[1], 3, 0), 3);
	EXPECT(avail(p[0]), 5);
	EXPECT(avail(q[0]), 8);
	char s[16] = { 0 };
	EXPECT(read(q[0], s, sizeof s), 8);
	SHOW("tee gave %s", s);
	EXPECT(read(p[0], s, sizeof s), 5);
	EXPECT_ERR(tee(p[0], q[1], 5, SPLICE_F_NONBLOCK), EAGAIN);

	/* vmsplice: user memory into a pipe, and out of one. */
	struct iovec iov[2] = { { "abc", 3 }, { "defgh", 5 } };
	EXPECT(vmsplice(p[1], iov, 2, 0), 8);
	char x[4] = { 0 }, y[8] = { 0 };
	struct iovec riov[2] = { { x, 3 }, { y, 7 } };
	EXPECT(vmsplice(p[0], riov, 2, 0), 8);
	SHOW("vmsplice gave %s %s", x, y);
	EXPECT_ERR(vmsplice(p[0], riov, 2, SPLICE_F_NONBLOCK), EAGAIN);
	EXPECT(vmsplice(p[1], iov, 0, 0), 0);
	EXPECT(vmsplice(f, iov, 0, 0), 0);

	/* Sockets: into a pipe and out of one. */
	int sv[2];
	EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	EXPECT(write(sv[0], "socket", 6), 6);
	EXPECT(splice(sv[1], NULL, p[1], NULL, 100, 0), 6);
	EXPECT(splice(p[0], NULL, sv[1], NULL, 100, 0), 6);
	EXPECT(read(sv[0], s, sizeof s), 6);
	EXPECT_TRUE(memcmp(s, "socket", 6) == 0);

	/* 1.5 MiB from a writer through a pipe into a file. */
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		_exit(write(p[1], src, BIG) == BIG ? 0 : 1);
	}
	close(p[1]);
	EXPECT(ftruncate(g, 0), 0);
	EXPECT(lseek(g, 0, SEEK_SET), 0);
	long total = 0, r;
	while ((r = splice(p[0], NULL, g, NULL, 1 << 20, 0)) > 0)
		total += r;
	EXPECT(r, 0);
	EXPECT(total, BIG);
	int st;
	EXPECT_TRUE(waitpid(pid, &st, 0) == pid);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	EXPECT(pread(g, got, BIG + 1, 0), BIG);
	EXPECT_TRUE(sum(got, BIG) == sum(src, BIG));
	/* The writer gone and the pipe empty: end of file. */
	EXPECT(splice(p[0], NULL, g, NULL, 10, 0), 0);
	EXPECT(tee(p[0], q[1], 10, 0), 0);
	close(p[0]);

	/* 1.5 MiB from the file through a pipe into a socket. */
	EXPECT(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		close(sv[1]);
		long n = 0;
		while (n < BIG && (r = read(sv[0], got + n, BIG - n)) > 0)
			n += r;
		_exit(n == BIG && sum(got, n) == sum(src, BIG) ? 0 : 1);
	}
	close(sv[0]);
	off = 0;
	total = 0;
	while (total < BIG) {
		r = splice(f, &off, p[1], NULL, BIG - total, 0);
		if (r <= 0)
			break;
		while (r > 0) {
			long w = splice(p[0], NULL, sv[1], NULL, r, 0);
			if (w <= 0)
				break;
			r -= w;
			total += w;
		}
	}
	EXPECT(total, BIG);
	EXPECT(off, BIG);
	EXPECT_TRUE(waitpid(pid, &st, 0) == pid);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(sv[1]);

	/* A blocking splice from an empty pipe, interrupted. */
	struct itimerval it = { .it_value = { 0, 50000 } };
	setitimer(ITIMER_REAL, &it, NULL);
	EXPECT_ERR(splice(p[0], NULL, g, NULL, 10, 0), EINTR);
	EXPECT(alarms, 1);
	/* O_NONBLOCK on the pipe. */
	EXPECT(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
	EXPECT_ERR(splice(p[0], NULL, g, NULL, 10, 0), EAGAIN);

	/* No reader: EPIPE and SIGPIPE, from each call. */
	close(q[0]);
	EXPECT(write(p[1], "xy", 2), 2);
	off = 0;
	EXPECT_ERR(splice(f, &off, q[1], NULL, 5, 0), EPIPE);
	EXPECT_ERR(splice(p[0], NULL, q[1], NULL, 5, 0), EPIPE);
	EXPECT_ERR(tee(p[0], q[1], 5, 0), EPIPE);
	EXPECT_ERR(vmsplice(q[1], iov, 2, 0), EPIPE);
	EXPECT(sigpipes, 4);
	EXPECT(pipe(q), 0);

	/* Errors. */
	int app = open(b, O_WRONLY | O_APPEND), d = open(dir, O_RDONLY | O_DIRECTORY);
	EXPECT(splice(99, NULL, 98, NULL, 0, 0), 0);
	EXPECT_ERR(splice(p[0], NULL, q[1], NULL, 5, 0x10), EINVAL);
	EXPECT_ERR(splice(99, NULL, q[1], NULL, 5, 0), EBADF);
	EXPECT_ERR(splice(p[0], NULL, 99, NULL, 5, 0), EBADF);
	EXPECT_ERR(splice(f, NULL, p[0], NULL, 5, 0), EBADF);
	EXPECT_ERR(splice(q[1], NULL, g, NULL, 5, 0), EBADF);
	EXPECT_ERR(splice(f, NULL, g, NULL, 5, 0), EINVAL);
	EXPECT_ERR(splice(p[0], NULL, p[1], NULL, 5, 0), EINVAL);
	off = 0;
	EXPECT_ERR(splice(p[0], &off, g, NULL, 5, 0), ESPIPE);
	EXPECT_ERR(splice(f, NULL, q[1], &off, 5, 0), ESPIPE);
	EXPECT_ERR(splice(f, BADPTR, q[1], NULL, 5, 0), EFAULT);
	EXPECT_ERR(splice(p[0], NULL, g, BADPTR, 5, 0), EFAULT);
	EXPECT_ERR(splice(p[0], NULL, app, NULL, 5, 0), EINVAL);
	EXPECT_ERR(splice(d, NULL, q[1], NULL, 5, 0), EINVAL);
	EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	EXPECT_ERR(splice(sv[0], &off, q[1], NULL, 5, 0), EINVAL);
	EXPECT_ERR(splice(f, NULL, q[1], NULL, -1, 0), EINVAL);
	EXPECT_ERR(tee(p[0], q[1], 0, 0x10), EINVAL);
	EXPECT(tee(99, 98, 0, 0), 0);
	EXPECT_ERR(tee(99, q[1], 5, 0), EBADF);
	EXPECT_ERR(tee(p[0], p[1], 5, 0), EINVAL);
	EXPECT_ERR(tee(f, q[1], 5, 0), EINVAL);
	EXPECT_ERR(tee(p[0], g, 5, 0), EINVAL);
	EXPECT_ERR(tee(q[1], p[1], 5, 0), EBADF);
	EXPECT_ERR(vmsplice(p[1], iov, 2, 0x10), EINVAL);
	EXPECT_ERR(vmsplice(99, iov, 2, 0), EBADF);
	EXPECT_ERR(vmsplice(f, iov, 2, 0), EBADF);
	EXPECT_ERR(vmsplice(p[1], iov, 1025, 0), EINVAL);
	EXPECT_ERR(vmsplice(p[1], BADPTR, 1, 0), EFAULT);
	int n = open("/dev/null", O_WRONLY);
	EXPECT_ERR(vmsplice(n, iov, 2, 0), EBADF);

	unlink(a);
	unlink(b);
	rmdir(dir);
	return t_done();
}
