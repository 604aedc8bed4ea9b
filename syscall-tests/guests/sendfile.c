/* sendfile(2): a file to a file, a socket, a pipe and /dev/null; offset
 * pointer semantics (read from *offset and store it back, the position
 * untouched) against the position's own (used and advanced); the count
 * capped by what a pipe holds; transfers over 1 MiB with checksums; and
 * the errors Linux gives: EBADF, ESPIPE, EINVAL (pipe or socket input,
 * appending output, negative offset or count, a directory), EFAULT,
 * EAGAIN, EPIPE with SIGPIPE. */
#include "t.h"
#include <sys/sendfile.h>
#include <sys/socket.h>

#define BIG (3L << 20)

static int sigpipes;
static void on_sigpipe(int s) { (void)s; sigpipes++; }

static unsigned long long sum(const unsigned char *p, long n)
{
	unsigned long long h = 1469598103934665603ULL;
	for (long i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

static unsigned char *src;

static unsigned long long file_sum(int fd, long *len)
{
	unsigned char *buf = malloc(BIG + 1);
	long n = 0, r;
	while ((r = pread(fd, buf + n, BIG + 1 - n, n)) > 0)
		n += r;
	*len = n;
	unsigned long long h = sum(buf, n);
	free(buf);
	return h;
}

int main(void)
{
	char dir[] = "/tmp/sendfileXXXXXX", path[64];
	if (!mkdtemp(dir))
		return 99;
	signal(SIGPIPE, on_sigpipe);
	src = malloc(BIG);
	for (long i = 0; i < BIG; i++)
		src[i] = (unsigned char)(i * 7 + (i >> 9));
	snprintf(path, sizeof path, "%s/src", dir);
	int in = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	EXPECT(write(in, src, BIG), BIG);
	EXPECT(lseek(in, 0, SEEK_SET), 0);
	snprintf(path, sizeof path, "%s/out", dir);
	int out = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

	/* With an offset pointer: read there, store it back, position kept. */
	off_t off = 100;
	EXPECT(sendfile(out, in, &off, 1000), 1000);
	EXPECT(off, 1100);
	EXPECT(lseek(in, 0, SEEK_CUR), 0);
	EXPECT(lseek(out, 0, SEEK_CUR), 1000);
	/* Without: the input's position is used and advanced. */
	EXPECT(lseek(in, 10, SEEK_SET), 10);
	EXPECT(sendfile(out, in, NULL, 20), 20);
	EXPECT(lseek(in, 0, SEEK_CUR), 30);
	unsigned char buf[2000];
	EXPECT(pread(out, buf, sizeof buf, 0), 1020);
	EXPECT_TRUE(memcmp(buf, src + 100, 1000) == 0 && memcmp(buf + 1000, src + 10, 20) == 0);
	/* End of file, beyond it, and a zero count. */
	off = BIG;
	EXPECT(sendfile(out, in, &off, 10), 0);
	off = BIG + 5000;
	EXPECT(sendfile(out, in, &off, 10), 0);
	EXPECT(off, BIG + 5000);
	EXPECT(sendfile(out, in, NULL, 0), 0);
	/* A near-endless count stops at the end of the file. */
	off = BIG - 7;
	EXPECT(sendfile(out, in, &off, (size_t)1 << 62), 7);

	/* 3 MiB file to file in one call, checksummed. */
	snprintf(path, sizeof path, "%s/big", dir);
	int big = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	off = 0;
	EXPECT(sendfile(big, in, &off, BIG), BIG);
	long len;
	unsigned long long h = file_sum(big, &len);
	EXPECT(len, BIG);
	EXPECT_TRUE(h == sum(src, BIG));

	/* 3 MiB file to a Unix stream socket, read by a child. */
	int sv[2];
	EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		unsigned char *got = malloc(BIG);
		long n = 0, r;
		while (n < BIG && (r = read(sv[1], got + n, BIG - n)) > 0)
			n += r;
		_exit(n == BIG && sum(got, n) == sum(src, BIG) ? 0 : 1);
	}
	close(sv[1]);
	EXPECT(lseek(in, 0, SEEK_SET), 0);
	EXPECT(sendfile(sv[0], in, NULL, BIG), BIG);
	EXPECT(lseek(in, 0, SEEK_CUR), BIG);
	int st;
	EXPECT_TRUE(waitpid(pid, &st, 0) == pid);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* The peer gone: EPIPE and SIGPIPE. */
	close(sv[0]);
	EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	close(sv[1]);
	off = 0;
	EXPECT_ERR(sendfile(sv[0], in, &off, 10), EPIPE);
	EXPECT(sigpipes, 1);
	close(sv[0]);

	/* To a pipe: no more than the pipe holds. */
	int p[2];
	EXPECT(pipe(p), 0);
	off = 0;
	EXPECT(sendfile(p[1], in, &off, 100000), 65536);
	EXPECT(off, 65536);
	unsigned char *pbuf = malloc(65536);
	EXPECT(read(p[0], pbuf, 65536), 65536);
	EXPECT_TRUE(memcmp(pbuf, src, 65536) == 0);
	EXPECT(sendfile(p[1], in, &off, 10), 10);
	EXPECT(read(p[0], pbuf, 100), 10);
	EXPECT_TRUE(memcmp(pbuf, src + 65536, 10) == 0);
	/* A socket's bytes may go to a pipe. */
	EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	EXPECT(write(sv[0], "sock", 4), 4);
	EXPECT(sendfile(p[1], sv[1], NULL, 100), 4);
	EXPECT(read(p[0], pbuf, 100), 4);
	EXPECT_TRUE(memcmp(pbuf, "sock", 4) == 0);
	/* A full non-blocking pipe. */
	int q[2];
	EXPECT(pipe2(q, O_NONBLOCK), 0);
	while (write(q[1], pbuf, 4096) > 0)
		;
	off = 0;
	EXPECT_ERR(sendfile(q[1], in, &off, 10), EAGAIN);
	EXPECT(off, 0);
	close(q[0]);
	EXPECT_ERR(sendfile(q[1], in, &off, 10), EPIPE);
	EXPECT(sigpipes, 2);
	close(q[1]);

	/* /dev/zero to /dev/null. */
	int z = open("/dev/zero", O_RDONLY), n = open("/dev/null", O_WRONLY);
	EXPECT(sendfile(n, z, NULL, 1 << 20), 1 << 20);

	/* Errors. */
	int ro = open(path, O_RDONLY), wo = open(path, O_WRONLY);
	snprintf(path, sizeof path, "%s/app", dir);
	int app = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
	int d = open(dir, O_RDONLY | O_DIRECTORY), opath = open(dir, O_PATH);
	EXPECT_ERR(sendfile(out, 99, NULL, 5), EBADF);
	EXPECT_ERR(sendfile(99, in, NULL, 5), EBADF);
	EXPECT_ERR(sendfile(out, wo, NULL, 5), EBADF);
	EXPECT_ERR(sendfile(ro, in, NULL, 5), EBADF);
	EXPECT_ERR(sendfile(out, opath, NULL, 5), EBADF);
	EXPECT_ERR(sendfile(99, in, BADPTR, 5), EFAULT);
	EXPECT_ERR(sendfile(out, p[0], NULL, 5), EINVAL);
	EXPECT_ERR(sendfile(p[1], p[0], NULL, 5), EINVAL);
	off = 0;
	EXPECT_ERR(sendfile(out, p[0], &off, 5), ESPIPE);
	EXPECT_ERR(sendfile(out, sv[1], &off, 5), ESPIPE);
	EXPECT_ERR(sendfile(out, sv[1], NULL, 5), EINVAL);
	EXPECT_ERR(sendfile(app, in, NULL, 5), EINVAL);
	EXPECT_ERR(sendfile(out, in, NULL, -1), EINVAL);
	off = -1;
	EXPECT_ERR(sendfile(out, in, &off, 5), EINVAL);
	EXPECT_ERR(sendfile(out, d, NULL, 5), EINVAL);
	EXPECT_ERR(sendfile(p[1], d, NULL, 5), EINVAL);
	EXPECT_ERR(sendfile(p[0], in, NULL, 5), EBADF);

	snprintf(path, sizeof path, "%s/src", dir);
	unlink(path);
	snprintf(path, sizeof path, "%s/out", dir);
	unlink(path);
	snprintf(path, sizeof path, "%s/big", dir);
	unlink(path);
	snprintf(path, sizeof path, "%s/app", dir);
	unlink(path);
	rmdir(dir);
	return t_done();
}
