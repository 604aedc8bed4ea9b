/* preadv2, pwritev2: offset -1 is the file position, the RWF_* flags each
 * kind of file takes (tmpfs, pipes, sockets, devices), RWF_APPEND and
 * RWF_NOAPPEND, RWF_NOWAIT's EAGAIN, RWF_NOSIGNAL, and the order of the
 * errors. */
#include "t.h"
#include <sys/socket.h>
#include <sys/uio.h>

#define HIPRI 0x01
#define DSYNC 0x02
#define SYNC 0x04
#define NOWAIT 0x08
#define APPEND 0x10
#define NOAPPEND 0x20
#define ATOMIC 0x40
#define DONTCACHE 0x80
#define NOSIGNAL 0x100

static char buf[64];
static struct iovec iov = {buf, 4};
static int sigpipes;

static long rd(int fd, long off, int flags)
{
	return syscall(SYS_preadv2, fd, &iov, 1, off, 0L, flags);
}

static long wr(int fd, const char *s, long off, int flags)
{
	struct iovec v = {(void *)s, strlen(s)};
	return syscall(SYS_pwritev2, fd, &v, 1, off, 0L, flags);
}

static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

static char *contents(int fd)
{
	static char c[64];
	memset(c, 0, sizeof c);
	pread(fd, c, sizeof c - 1, 0);
	return c;
}

int main(void)
{
	signal(SIGPIPE, on_sigpipe);
	int fd = memfd_create("f", 0);
	EXPECT(write(fd, "hello world", 11), 11);
	/* At an offset: the position stays; at -1: from the position on. */
	EXPECT(rd(fd, 0, 0), 4);
	SHOW("read at 0: %.4s", buf);
	EXPECT(lseek(fd, 2, SEEK_SET), 2);
	EXPECT(rd(fd, -1, 0), 4);
	SHOW("read at -1: %.4s", buf);
	EXPECT(lseek(fd, 0, SEEK_CUR), 6);
	EXPECT(rd(fd, 1, HIPRI | DSYNC | SYNC), 4);
	EXPECT(lseek(fd, 0, SEEK_CUR), 6);
	EXPECT(wr(fd, "HE", 0, HIPRI | DSYNC | SYNC), 2);
	EXPECT(wr(fd, "W", -1, 0), 1);
	EXPECT(lseek(fd, 0, SEEK_CUR), 7);
	SHOW("after writes: %s", contents(fd));
	/* What tmpfs does not take, and flags Linux does not know. */
	EXPECT_ERR(rd(fd, 0, NOWAIT), EOPNOTSUPP);
	EXPECT_ERR(wr(fd, "x", 0, NOWAIT), EOPNOTSUPP);
	EXPECT_ERR(rd(fd, 0, ATOMIC), EOPNOTSUPP);
	EXPECT_ERR(wr(fd, "x", 0, ATOMIC), EOPNOTSUPP);
	EXPECT_ERR(rd(fd, 0, DONTCACHE), EOPNOTSUPP);
	EXPECT_ERR(rd(fd, 0, 0x200), EOPNOTSUPP);
	EXPECT_ERR(wr(fd, "x", 0, 0x80000000), EOPNOTSUPP);
	EXPECT_ERR(wr(fd, "x", 0, APPEND | NOAPPEND), EINVAL);
	EXPECT_ERR(rd(fd, 0, APPEND | NOAPPEND | NOSIGNAL), EINVAL);
	/* The order of the errors: offset, descriptor, access, iovec, flags;
	 * nothing to move is 0 whatever the flags. */
	EXPECT_ERR(rd(fd, -2, 0), EINVAL);
	EXPECT_ERR(rd(99, -2, 0), EINVAL);
	EXPECT_ERR(rd(99, 0, 0x200), EBADF);
	EXPECT_ERR(syscall(SYS_preadv2, fd, BADPTR, 1, 0L, 0L, 0x200), EFAULT);
	EXPECT(syscall(SYS_preadv2, fd, &iov, 0, 0L, 0L, 0x200), 0);
	EXPECT_ERR(syscall(SYS_preadv, fd, &iov, 1, -1L, 0L), EINVAL);
	int ro = open("/dev/null", O_RDONLY);
	EXPECT_ERR(wr(ro, "x", -1, 0), EBADF);
	close(ro);

	/* RWF_APPEND writes at the end; only at -1 does the position move. */
	EXPECT(wr(fd, "<a>", 0, APPEND), 3);
	EXPECT(lseek(fd, 0, SEEK_CUR), 7);
	EXPECT(wr(fd, "<b>", -1, APPEND), 3);
	EXPECT(lseek(fd, 0, SEEK_CUR), 17);
	SHOW("appended: %s", contents(fd));
	/* O_APPEND: pwrite appends too (pwrite(2), BUGS); RWF_NOAPPEND
	 * writes where it is told. */
	EXPECT(fcntl(fd, F_SETFL, O_APPEND), 0);
	EXPECT(pwrite(fd, "<c>", 3, 0), 3);
	EXPECT(wr(fd, "__", 0, NOAPPEND), 2);
	EXPECT(wr(fd, "++", -1, NOAPPEND), 2);
	EXPECT(lseek(fd, 0, SEEK_CUR), 19);
	SHOW("O_APPEND file: %s", contents(fd));

	/* A pipe: no offsets; RWF_NOWAIT is EAGAIN where the read would wait. */
	int p[2];
	EXPECT(pipe(p), 0);
	EXPECT_ERR(rd(p[0], 0, 0), ESPIPE);
	EXPECT_ERR(wr(p[1], "x", 0, 0), ESPIPE);
	EXPECT_ERR(rd(p[0], -1, NOWAIT), EAGAIN);
	EXPECT(wr(p[1], "pipe", -1, NOWAIT | DSYNC), 4);
	EXPECT(rd(p[0], -1, NOWAIT), 4);
	SHOW("from the pipe: %.4s", buf);
	EXPECT_ERR(rd(p[0], -1, DONTCACHE), EOPNOTSUPP);
	EXPECT_ERR(wr(p[1], "x", -1, ATOMIC), EOPNOTSUPP);
	close(p[0]);
	EXPECT_ERR(wr(p[1], "x", -1, NOSIGNAL), EPIPE);
	EXPECT(sigpipes, 0);
	EXPECT_ERR(wr(p[1], "x", -1, 0), EPIPE);
	EXPECT(sigpipes, 1);
	close(p[1]);

	/* A socket: the same, through send and recv. */
	int s[2];
	EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0);
	EXPECT_ERR(rd(s[0], 0, 0), ESPIPE);
	EXPECT_ERR(rd(s[0], -1, NOWAIT), EAGAIN);
	EXPECT(wr(s[1], "sock", -1, NOWAIT), 4);
	EXPECT(rd(s[0], -1, NOWAIT | HIPRI), 4);
	SHOW("from the socket: %.4s", buf);
	close(s[0]);
	EXPECT_ERR(wr(s[1], "x", -1, NOSIGNAL), EPIPE);
	EXPECT(sigpipes, 1);
	EXPECT_ERR(wr(s[1], "x", -1, 0), EPIPE);
	EXPECT(sigpipes, 2);

	/* Devices: /dev/null takes RWF_NOWAIT; /dev/full writes without
	 * write_iter, so only RWF_HIPRI. */
	int null = open("/dev/null", O_RDWR);
	EXPECT(rd(null, -1, NOWAIT), 0);
	EXPECT(wr(null, "xyz", 5, NOWAIT | APPEND), 3);
	EXPECT_ERR(wr(null, "x", -1, DONTCACHE), EOPNOTSUPP);
	int full = open("/dev/full", O_RDWR);
	EXPECT(rd(full, -1, SYNC), 4);
	EXPECT_ERR(rd(full, -1, NOWAIT), EOPNOTSUPP);
	EXPECT_ERR(wr(full, "x", -1, HIPRI), ENOSPC);
	EXPECT_ERR(wr(full, "x", -1, DSYNC), EOPNOTSUPP);
	EXPECT_ERR(wr(full, "x", -1, APPEND | NOAPPEND), EOPNOTSUPP);
	return t_done();
}
