/* vhangup(2): a session leader's pty hangs up for every description open
 * on it (reads see end of file, writes and ioctls EIO, poll reports a
 * hang-up), the leader gets SIGHUP and SIGCONT, the session loses the
 * terminal, and a new open works again; without CAP_SYS_TTY_CONFIG it is
 * EPERM; without a controlling terminal it does nothing. */
#include "t.h"

#include <poll.h>
#include <termios.h>
#include <sys/ioctl.h>

static volatile int hups, conts;

static void on_sig(int sig)
{
	if (sig == SIGHUP)
		hups++;
	else
		conts++;
}

static int child(void)
{
	signal(SIGHUP, on_sig);
	signal(SIGCONT, on_sig);
	EXPECT_TRUE(setsid() > 0);
	int m = posix_openpt(O_RDWR | O_NOCTTY);
	if (m < 0 || grantpt(m) || unlockpt(m))
		return 125;
	char name[64];
	snprintf(name, sizeof name, "%s", ptsname(m));
	/* Opened without O_NOCTTY by a session leader: the controlling tty. */
	int s = open(name, O_RDWR);
	int s2 = open(name, O_RDWR | O_NOCTTY);
	EXPECT_TRUE(s >= 0 && s2 >= 0);
	int t = open("/dev/tty", O_RDWR);
	EXPECT_TRUE(t >= 0);
	close(t);

	EXPECT(vhangup(), 0);
	char buf[16];
	EXPECT(read(s, buf, sizeof buf), 0);
	EXPECT(read(s2, buf, sizeof buf), 0);
	EXPECT_ERR(write(s, "x", 1), EIO);
	struct pollfd p = { .fd = s2, .events = POLLIN | POLLOUT };
	EXPECT(poll(&p, 1, 0), 1);
	SHOW("revents %#x", p.revents);
	struct termios tio;
	EXPECT_ERR(ioctl(s, TCGETS, &tio), EIO);
	pid_t pg = getpgrp();
	EXPECT_ERR(ioctl(s, TIOCSPGRP, &pg), ENOTTY);
	EXPECT(hups, 1);
	EXPECT(conts, 1);
	EXPECT_ERR(open("/dev/tty", O_RDWR), ENXIO);

	/* A new open is not hung up. */
	int s3 = open(name, O_RDWR | O_NOCTTY);
	EXPECT_TRUE(s3 >= 0);
	EXPECT(write(s3, "hi\n", 3), 3);
	usleep(10000);
	int n = read(m, buf, sizeof buf);
	SHOW("master read %d bytes", n);
	EXPECT_OK(ioctl(s3, TCGETS, &tio));

	/* No controlling terminal any more: nothing to hang up. */
	EXPECT(vhangup(), 0);
	EXPECT(hups, 1);
	return t_done();
}

int main(void)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		_exit(child());
	int st;
	waitpid(pid, &st, 0);
	EXPECT(WEXITSTATUS(st), 0);

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		/* An ordinary user has no CAP_SYS_TTY_CONFIG. */
		if (setresuid(65534, 65534, 65534))
			_exit(125);
		EXPECT_ERR(vhangup(), EPERM);
		_exit(t_done());
	}
	waitpid(pid, &st, 0);
	EXPECT(WEXITSTATUS(st), 0);
	return t_done();
}
