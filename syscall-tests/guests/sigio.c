/* Signal-driven I/O (fcntl(2) F_SETOWN, F_GETOWN, F_SETOWN_EX, F_GETOWN_EX,
 * F_SETSIG, F_GETSIG, O_ASYNC; ioctl FIOASYNC) on pipes and ptys: the
 * owner gets SIGIO (as from the kernel) or, after F_SETSIG, that signal
 * with si_code POLL_IN/POLL_OUT, si_band and si_fd. Signals are blocked
 * and collected with sigtimedwait, so nothing depends on timing but the
 * pty's line discipline, which natively runs after the write returns
 * (hence the waits of up to 5 s). */
#include "t.h"
#include <poll.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <termios.h>

#ifndef F_SETSIG
#define F_SETSIG 10
#define F_GETSIG 11
#endif

static sigset_t set;

/* Waits up to `ms` for one of the blocked signals; prints what came. */
static void got(const char *what, int ms, int fd)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	siginfo_t si;
	memset(&si, 0, sizeof si);
	int sig = sigtimedwait(&set, &si, &ts);
	if (sig < 0) {
		printf("%s: none (%s)\n", what, errname(errno));
		return;
	}
	if (sig == SIGIO && si.si_code == SI_KERNEL) {
		printf("%s: SIGIO SI_KERNEL\n", what);
		return;
	}
	printf("%s: %s%d code=%d band=%#lx fd_matches=%d\n", what,
	       sig >= SIGRTMIN ? "SIGRTMIN+" : "sig ", sig >= SIGRTMIN ? sig - SIGRTMIN : sig,
	       si.si_code, (long)si.si_band, si.si_fd == fd);
}

int main(void)
{
	/* A group of its own, visible in its PID namespace (a runner's group
	 * may lie outside it, and getpgrp() would then be 0). */
	setpgid(0, 0);
	sigemptyset(&set);
	sigaddset(&set, SIGIO);
	sigaddset(&set, SIGRTMIN + 2);
	sigaddset(&set, SIGRTMIN + 3);
	sigprocmask(SIG_BLOCK, &set, NULL);
	int one = 1, zero = 0;

	int p[2];
	EXPECT(pipe(p), 0);
	int r = p[0], w = p[1];

	/* Owners. */
	EXPECT(fcntl(r, F_GETOWN), 0);
	EXPECT(fcntl(r, F_GETSIG), 0);
	struct f_owner_ex ex = { 7, 7 };
	EXPECT(fcntl(r, F_GETOWN_EX, &ex), 0);
	printf("default owner_ex: type=%d pid=%d\n", ex.type, ex.pid);
	EXPECT(fcntl(r, F_SETOWN, getpid()), 0);
	EXPECT_TRUE(fcntl(r, F_GETOWN) == getpid());
	EXPECT(fcntl(r, F_GETOWN_EX, &ex), 0);
	EXPECT_TRUE(ex.type == F_OWNER_PID && ex.pid == getpid());
	EXPECT(fcntl(r, F_SETOWN, -getpgrp()), 0);
	EXPECT_TRUE(fcntl(r, F_GETOWN) == -getpgrp());
	EXPECT(fcntl(r, F_GETOWN_EX, &ex), 0);
	EXPECT_TRUE(ex.type == F_OWNER_PGRP && ex.pid == getpgrp());
	EXPECT_ERR(fcntl(r, F_SETOWN, 0x3ffffff0), ESRCH);
	EXPECT_ERR(fcntl(r, F_SETOWN, INT_MIN), EINVAL);
	ex.type = 3;
	ex.pid = getpid();
	EXPECT_ERR(fcntl(r, F_SETOWN_EX, &ex), EINVAL);
	ex.type = F_OWNER_PID;
	ex.pid = 0x3ffffff0;
	EXPECT_ERR(fcntl(r, F_SETOWN_EX, &ex), ESRCH);
	ex.type = F_OWNER_TID;
	ex.pid = gettid();
	EXPECT(fcntl(r, F_SETOWN_EX, &ex), 0);
	EXPECT_TRUE(fcntl(r, F_GETOWN) == gettid());
	EXPECT_ERR(fcntl(r, F_SETSIG, 65), EINVAL);
	EXPECT_ERR(fcntl(r, F_SETSIG, -1), EINVAL);
	/* The argument is an int: the upper half of the register is ignored. */
	EXPECT(syscall(SYS_fcntl, r, F_SETSIG, 0x100000000L + SIGUSR1), 0);
	EXPECT(fcntl(r, F_GETSIG), SIGUSR1);
	int op = open("/", O_PATH);
	EXPECT_ERR(fcntl(op, F_GETOWN), EBADF);
	EXPECT_ERR(fcntl(op, F_SETOWN, getpid()), EBADF);
	EXPECT_ERR(fcntl(op, F_SETSIG, 0), EBADF);
	close(op);
	EXPECT(fcntl(r, F_SETSIG, 0), 0);
	EXPECT(fcntl(r, F_SETOWN, getpid()), 0);

	/* Without O_ASYNC, nothing. */
	EXPECT(write(w, "a", 1), 1);
	got("write, no O_ASYNC", 0, r);

	/* O_ASYNC on the read end: every write signals it. */
	EXPECT(fcntl(r, F_SETFL, O_ASYNC | O_NONBLOCK), 0);
	EXPECT_TRUE(fcntl(r, F_GETFL) & O_ASYNC);
	EXPECT(write(w, "b", 1), 1);
	got("write", 0, r);
	got("write, again", 0, r);
	EXPECT(fcntl(r, F_SETSIG, SIGRTMIN + 2), 0);
	EXPECT_TRUE(fcntl(r, F_GETSIG) == SIGRTMIN + 2);
	EXPECT(write(w, "cd", 2), 2);
	got("write, F_SETSIG", 0, r);
	/* A read signals the writers only. */
	char b[16];
	EXPECT(read(r, b, 1), 1);
	got("read, writers not async", 0, r);

	/* FIOASYNC on the write end: reads signal it. */
	EXPECT(ioctl(w, FIOASYNC, &one), 0);
	EXPECT_TRUE(fcntl(w, F_GETFL) & O_ASYNC);
	EXPECT(fcntl(w, F_GETOWN), 0);
	EXPECT(fcntl(w, F_SETOWN, getpid()), 0);
	EXPECT(read(r, b, 3), 3);
	got("read", 0, w);
	EXPECT(fcntl(w, F_SETSIG, SIGRTMIN + 3), 0);
	EXPECT_ERR(read(r, b, 3), EAGAIN);
	got("empty read, F_SETSIG", 0, w);
	got("nothing more", 0, w);

	/* Off again. */
	EXPECT(ioctl(r, FIOASYNC, &zero), 0);
	EXPECT_TRUE(!(fcntl(r, F_GETFL) & O_ASYNC));
	EXPECT(write(w, "e", 1), 1);
	got("write, async off", 0, r);
	EXPECT(read(r, b, 1), 1);
	got("read, writer still async", 0, w);
	EXPECT(ioctl(w, FIOASYNC, &zero), 0);

	/* Files with no fasync operation. */
	int null = open("/dev/null", O_RDWR);
	EXPECT_ERR(ioctl(null, FIOASYNC, &one), ENOTTY);
	/* F_SETFL takes O_ASYNC only through the fasync operation. */
	EXPECT(fcntl(null, F_SETFL, O_ASYNC), 0);
	EXPECT_TRUE(!(fcntl(null, F_GETFL) & O_ASYNC));

	/* Unix sockets: data arriving signals the receiver; a connection
	 * arriving signals the listener. */
	int sv[2];
	EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	EXPECT(fcntl(sv[0], F_SETOWN, getpid()), 0);
	EXPECT(ioctl(sv[0], FIOASYNC, &one), 0);
	EXPECT_TRUE(fcntl(sv[0], F_GETFL) & O_ASYNC);
	EXPECT(write(sv[1], "s", 1), 1);
	got("stream data", 0, sv[0]);
	EXPECT(fcntl(sv[0], F_SETSIG, SIGRTMIN + 2), 0);
	EXPECT(send(sv[1], "tu", 2, 0), 2);
	got("stream data, F_SETSIG", 0, sv[0]);
	EXPECT(write(sv[0], "v", 1), 1);
	got("the sender is not signalled", 0, sv[0]);
	int dg[2];
	EXPECT(socketpair(AF_UNIX, SOCK_DGRAM, 0, dg), 0);
	EXPECT(fcntl(dg[1], F_SETOWN, getpid()), 0);
	EXPECT(fcntl(dg[1], F_SETFL, O_ASYNC), 0);
	EXPECT(send(dg[0], "w", 1, 0), 1);
	got("datagram", 0, dg[1]);
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path + 1, sizeof sa.sun_path - 1, "sigio-%d", getpid());
	socklen_t salen = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(sa.sun_path + 1);
	EXPECT(bind(l, (struct sockaddr *)&sa, salen), 0);
	EXPECT(listen(l, 4), 0);
	EXPECT(fcntl(l, F_SETOWN, getpid()), 0);
	EXPECT(fcntl(l, F_SETFL, O_ASYNC), 0);
	int c = socket(AF_UNIX, SOCK_STREAM, 0);
	EXPECT(connect(c, (struct sockaddr *)&sa, salen), 0);
	got("connection", 0, l);

	/* A pty: the master's owner defaults to the caller. */
	int m, s;
	open_pty(&m, &s);
	struct termios t;
	tcgetattr(s, &t);
	t.c_lflag &= ~ECHO;
	tcsetattr(s, TCSANOW, &t);
	EXPECT(fcntl(m, F_SETFL, O_ASYNC | O_RDWR), 0);
	EXPECT_TRUE(fcntl(m, F_GETOWN) == getpid());
	EXPECT(write(s, "out", 3), 3);
	got("slave wrote", 5000, m);
	EXPECT(read(m, b, sizeof b), 3);

	/* The slave in canonical mode: one signal per complete line. */
	EXPECT(ioctl(s, FIOASYNC, &one), 0);
	EXPECT_TRUE(fcntl(s, F_GETOWN) == getpid());
	EXPECT(fcntl(s, F_SETSIG, SIGRTMIN + 3), 0);
	EXPECT(write(m, "ab", 2), 2);
	got("partial line", 200, s);
	EXPECT(write(m, "\n", 1), 1);
	got("line", 5000, s);
	got("nothing more", 200, s);
	EXPECT(read(s, b, sizeof b), 3);
	return t_done();
}
