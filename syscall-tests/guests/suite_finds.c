/* What gVisor's syscall tests found hanging or wrong (issue 20): a pipe
 * writer whose reader leaves mid-write gets its count and SIGPIPE; a
 * forked child starts with its parent's FP control state; rename of "/",
 * "." or ".." is EBUSY; a Unix stream read stops after a piece that
 * carries descriptors, and never drops them. */
#include "t.h"
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

static volatile int pipes;
static void on_pipe(int s) { (void)s; pipes++; }

static void send_piece(int s, char c, int fd)
{
	struct iovec io = {&c, 1};
	char cb[CMSG_SPACE(sizeof(int))];
	struct msghdr mh = {.msg_iov = &io, .msg_iovlen = 1};
	if (fd >= 0) {
		mh.msg_control = cb;
		mh.msg_controllen = sizeof cb;
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof fd);
	}
	EXPECT(sendmsg(s, &mh, 0), 1);
}

static void recv_piece(int s)
{
	char rb[10], cb[256];
	struct iovec io = {rb, sizeof rb};
	struct msghdr mh = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = cb,
			    .msg_controllen = sizeof cb};
	long n = recvmsg(s, &mh, MSG_DONTWAIT);
	SHOW("read %ld [%.*s], descriptors %s", n, (int)(n > 0 ? n : 0), rb,
	     n > 0 && mh.msg_controllen ? "yes" : "no");
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	if (cm && cm->cmsg_type == SCM_RIGHTS) {
		int fd;
		memcpy(&fd, CMSG_DATA(cm), sizeof fd);
		close(fd);
	}
}

int main(void)
{
	/* A pipe write that outlives its reader. */
	struct sigaction sa = {.sa_handler = on_pipe};
	EXPECT_OK(sigaction(SIGPIPE, &sa, NULL));
	int p[2];
	EXPECT_OK(pipe(p));
	pid_t c = fork();
	if (c == 0) {
		char b[100];
		close(p[1]);
		_exit(read(p[0], b, sizeof b) == 100 ? 0 : 1);
	}
	close(p[0]);
	static char big[1 << 20];
	long w = write(p[1], big, sizeof big);
	EXPECT_TRUE(w > 0 && w < (long)sizeof big);
	EXPECT(pipes, 1);
	EXPECT_ERR(write(p[1], big, 1), EPIPE);
	EXPECT(pipes, 2);
	int st;
	EXPECT_TRUE(waitpid(c, &st, 0) == c);
	EXPECT(st, 0);

	/* FP control state across fork: MXCSR with FTZ and DAZ, and the x87
	 * control word with another rounding mode. */
	unsigned mx = 0x1f80 | 0x8040, got;
	unsigned short cw = 0x37f | 0xc00, gotcw;
	__asm__ volatile("ldmxcsr %0" ::"m"(mx));
	__asm__ volatile("fldcw %0" ::"m"(cw));
	c = fork();
	if (c == 0) {
		__asm__ volatile("stmxcsr %0" : "=m"(got));
		__asm__ volatile("fnstcw %0" : "=m"(gotcw));
		_exit(got == mx && gotcw == cw ? 0 : 1);
	}
	EXPECT_TRUE(waitpid(c, &st, 0) == c);
	EXPECT(st, 0);

	/* rename of what names no entry. */
	char dir[] = "/tmp/suite_finds.XXXXXX", a[64], b[64];
	EXPECT_TRUE(mkdtemp(dir) != NULL);
	snprintf(a, sizeof a, "%s/a", dir);
	EXPECT_OK(mkdir(a, 0755));
	EXPECT_ERR(rename("/", "/bin"), EBUSY);
	snprintf(b, sizeof b, "%s/.", dir);
	EXPECT_ERR(rename(b, a), EBUSY);
	snprintf(b, sizeof b, "%s/..", a);
	EXPECT_ERR(rename(a, b), EBUSY);
	snprintf(b, sizeof b, "%s/a/b", dir);
	EXPECT_ERR(rename(a, b), EINVAL);
	rmdir(a);
	rmdir(dir);

	/* Descriptors on a Unix stream. */
	int sv[2];
	EXPECT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	int fd = CHECK(open(FIX("file.txt"), O_RDONLY));
	send_piece(sv[0], 'a', fd);
	send_piece(sv[0], 'b', fd);
	recv_piece(sv[1]);
	recv_piece(sv[1]);
	send_piece(sv[0], 'c', -1);
	send_piece(sv[0], 'd', fd);
	send_piece(sv[0], 'e', -1);
	send_piece(sv[0], 'f', -1);
	recv_piece(sv[1]);
	recv_piece(sv[1]);
	recv_piece(sv[1]);
	return t_done();
}
