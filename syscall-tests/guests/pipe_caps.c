/* Pipes: 64 KiB default capacity (F_GETPIPE_SZ), filling a non-blocking
 * pipe to EAGAIN, F_SETPIPE_SZ, PIPE_BUF atomicity with concurrent writers,
 * O_NONBLOCK reads, O_CLOEXEC, EOF, and SIGPIPE/EPIPE. */
#include "t.h"
#include <sys/ioctl.h>
#include <sys/wait.h>

int main(void)
{
	int p[2];
	EXPECT(pipe2(p, O_NONBLOCK), 0);
	EXPECT(p[0], 3);
	EXPECT(p[1], 4);
	EXPECT(fcntl(p[0], F_GETPIPE_SZ), 65536);
	EXPECT(fcntl(p[1], F_GETPIPE_SZ), 65536);
	EXPECT(fcntl(p[0], F_GETFL), O_RDONLY | O_NONBLOCK);
	EXPECT(fcntl(p[1], F_GETFL), O_WRONLY | O_NONBLOCK);
	EXPECT(fcntl(p[0], F_GETFD), 0);
	char buf[4096];
	EXPECT_ERR(read(p[0], buf, sizeof buf), EAGAIN);
	/* Fill it. */
	memset(buf, 'a', sizeof buf);
	long total = 0;
	for (;;) {
		ssize_t n = write(p[1], buf, sizeof buf);
		if (n < 0) {
			EXPECT_TRUE(errno == EAGAIN);
			break;
		}
		total += n;
	}
	EXPECT(total, 65536);
	/* A write of at most PIPE_BUF bytes is all or nothing: EAGAIN, not a
	 * short write, when there is less room. */
	EXPECT(read(p[0], buf, 100), 100);
	EXPECT_ERR(write(p[1], buf, 200), EAGAIN);
	/* Larger than PIPE_BUF may be partial. */
	char big[8192];
	memset(big, 'b', sizeof big);
	EXPECT_ERR(write(p[1], big, sizeof big), EAGAIN);
	/* FIONREAD. */
	int avail = 0;
	EXPECT(ioctl(p[0], FIONREAD, &avail), 0);
	EXPECT(avail, 65436);
	/* Resize: shrinking below the content is EBUSY; growing works; the size
	 * rounds up to a power-of-two number of pages. */
	EXPECT_ERR(fcntl(p[1], F_SETPIPE_SZ, 4096), EBUSY);
	EXPECT(fcntl(p[1], F_SETPIPE_SZ, 100000), 131072);
	EXPECT(fcntl(p[0], F_GETPIPE_SZ), 131072);
	close(p[0]);
	close(p[1]);
	EXPECT(pipe2(p, 0), 0);
	EXPECT(fcntl(p[1], F_SETPIPE_SZ, 1), 4096);
	EXPECT(fcntl(p[1], F_SETPIPE_SZ, 65536), 65536);
	EXPECT_ERR(fcntl(p[1], F_SETPIPE_SZ, 1 << 30), EPERM);

	/* Atomicity: 4 writers each write 64 chunks of PIPE_BUF bytes of their
	 * own letter; the reader must see whole chunks only. */
	for (int w = 0; w < 4; w++) {
		if (fork() == 0) {
			close(p[0]);
			char chunk[PIPE_BUF];
			memset(chunk, 'A' + w, sizeof chunk);
			for (int i = 0; i < 64; i++)
				if (write(p[1], chunk, sizeof chunk) != sizeof chunk)
					_exit(1);
			_exit(0);
		}
	}
	close(p[1]);
	static char all[4 * 64 * PIPE_BUF + 1];
	long got = 0;
	for (;;) {
		ssize_t n = read(p[0], all + got, sizeof all - got);
		if (n <= 0)
			break;
		got += n;
	}
	EXPECT(got, 4 * 64 * PIPE_BUF);
	int torn = 0, counts[4] = {0};
	for (long off = 0; off < got; off += PIPE_BUF) {
		for (int i = 1; i < PIPE_BUF; i++)
			if (all[off + i] != all[off]) {
				torn++;
				break;
			}
		if (all[off] >= 'A' && all[off] <= 'D')
			counts[all[off] - 'A']++;
	}
	EXPECT(torn, 0);
	EXPECT(counts[0] + counts[1] + counts[2] + counts[3], 256);
	for (int w = 0; w < 4; w++) {
		int st;
		wait(&st);
		EXPECT(WEXITSTATUS(st), 0);
	}
	/* All writers gone: EOF. */
	EXPECT(read(p[0], buf, 1), 0);
	close(p[0]);

	/* O_CLOEXEC. */
	EXPECT(pipe2(p, O_CLOEXEC), 0);
	EXPECT(fcntl(p[0], F_GETFD), FD_CLOEXEC);
	EXPECT_ERR(pipe2(p, O_APPEND), EINVAL);
	EXPECT_ERR(pipe(BADPTR), EFAULT);

	/* No readers: SIGPIPE kills by default... */
	close(p[0]);
	pid_t c = fork();
	if (c == 0) {
		write(p[1], "x", 1);
		_exit(0);
	}
	int st;
	waitpid(c, &st, 0);
	EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGPIPE);
	/* ... and with SIGPIPE ignored, write fails with EPIPE. */
	signal(SIGPIPE, SIG_IGN);
	EXPECT_ERR(write(p[1], "x", 1), EPIPE);
	/* A blocked SIGPIPE stays pending after EPIPE. */
	signal(SIGPIPE, SIG_DFL);
	sigset_t s, pend;
	sigemptyset(&s);
	sigaddset(&s, SIGPIPE);
	sigprocmask(SIG_BLOCK, &s, NULL);
	EXPECT_ERR(write(p[1], "x", 1), EPIPE);
	sigpending(&pend);
	EXPECT(sigismember(&pend, SIGPIPE), 1);
	signal(SIGPIPE, SIG_IGN);
	sigprocmask(SIG_UNBLOCK, &s, NULL);
	close(p[1]);

	/* A blocking reader wakes when data arrives from another process. */
	EXPECT(pipe(p), 0);
	c = fork();
	if (c == 0) {
		usleep(100000);
		write(p[1], "hello", 5);
		_exit(0);
	}
	EXPECT(read(p[0], buf, sizeof buf), 5);
	waitpid(c, NULL, 0);
	return t_done();
}
