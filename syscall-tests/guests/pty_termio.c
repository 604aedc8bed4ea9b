/* The old termio ioctls (TCGETA, TCSETA, TCSETAW, TCSETAF; ioctl_tty(2)):
 * a struct termio holds the low 16 bits of each flag word and the first 8
 * control characters; setting one keeps the upper bits and the other
 * characters. Then TIOCSTI: Linux 6.2+ refuses it with EIO unless the
 * caller has CAP_SYS_ADMIN or the sysctl dev.tty.legacy_tiocsti is 1 (and
 * then, with EPERM, on any terminal but the caller's controlling one).
 * The sandbox's sysctl is 0; natively it may be either, so what is printed
 * is whether the answer follows the rule for the sysctl as the process
 * reads it, as an unprivileged user. */
#include "t.h"
#include <grp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termio.h>
#include <termios.h>

static void show(const char *what, const struct termio *t)
{
	printf("%s: iflag=%#x oflag=%#x cflag=%#x lflag=%#x line=%u cc=", what, t->c_iflag,
	       t->c_oflag, t->c_cflag, t->c_lflag, t->c_line);
	for (int i = 0; i < NCC; i++)
		printf(i ? ",%u" : "%u", t->c_cc[i]);
	printf("\n");
}

/* Waits up to 5 s for fd to be readable. */
static int readable(int fd, int ms)
{
	struct pollfd p = { fd, POLLIN, 0 };
	return poll(&p, 1, ms) == 1;
}

static int legacy_tiocsti(void)
{
	char b[16];
	if (t_slurp("/proc/sys/dev/tty/legacy_tiocsti", b, sizeof b) < 0)
		return 1; /* before Linux 6.2: always the legacy rule */
	return b[0] == '1';
}

int main(void)
{
	int m, s;
	open_pty(&m, &s);
	struct termio a;
	struct termios t;

	/* The defaults, from either end. */
	EXPECT(ioctl(s, TCGETA, &a), 0);
	show("slave", &a);
	memset(&a, 0xff, sizeof a);
	EXPECT(ioctl(m, TCGETA, &a), 0);
	show("master", &a);
	EXPECT_TRUE(((unsigned char *)&a)[sizeof a - 1] == 0);

	/* The upper bits and c_cc[8..] survive a TCSETA. */
	EXPECT(tcgetattr(s, &t), 0);
	t.c_cflag |= CRTSCTS;
	t.c_cc[VSTART] = 0x01;
	EXPECT(tcsetattr(s, TCSANOW, &t), 0);
	EXPECT(ioctl(s, TCGETA, &a), 0);
	show("CRTSCTS and VSTART set", &a);
	a.c_lflag &= ~(ECHO | ICANON);
	a.c_iflag |= IUTF8;
	a.c_cc[VINTR] = 0x02;
	a.c_cc[VMIN] = 3;
	a.c_line = 0;
	EXPECT(ioctl(m, TCSETA, &a), 0);
	EXPECT(tcgetattr(s, &t), 0);
	printf("termios: iflag=%#x cflag=%#x lflag=%#x VINTR=%u VMIN=%u VSTART=%u VSTOP=%u\n",
	       t.c_iflag, t.c_cflag, t.c_lflag, t.c_cc[VINTR], t.c_cc[VMIN], t.c_cc[VSTART],
	       t.c_cc[VSTOP]);
	a.c_lflag |= ICANON;
	EXPECT(ioctl(s, TCSETAW, &a), 0);
	EXPECT(ioctl(s, TCGETA, &a), 0);
	show("after TCSETAW", &a);

	/* A pty keeps 8 data bits, no parity, and the receiver on. */
	struct termio a7 = a;
	a7.c_cflag = (a7.c_cflag & ~(CSIZE | CREAD)) | CS7 | PARENB;
	EXPECT(ioctl(s, TCSETA, &a7), 0);
	EXPECT(ioctl(m, TCGETA, &a7), 0);
	printf("after CS7|PARENB: cflag=%#x\n", a7.c_cflag);

	/* TCSETAF drops what the slave has not read. */
	EXPECT(write(m, "line\n", 5), 5);
	EXPECT_TRUE(readable(s, 5000));
	EXPECT(ioctl(s, TCSETAF, &a), 0);
	EXPECT_TRUE(!readable(s, 200));
	int n = -1;
	EXPECT(ioctl(s, FIONREAD, &n), 0);
	EXPECT(n, 0);

	/* Bad pointers and files that are no terminal. */
	EXPECT_ERR(ioctl(s, TCGETA, BADPTR), EFAULT);
	EXPECT_ERR(ioctl(s, TCSETA, BADPTR), EFAULT);
	int pp[2];
	EXPECT(pipe(pp), 0);
	EXPECT_ERR(ioctl(pp[0], TCGETA, &a), ENOTTY);
	EXPECT_ERR(ioctl(pp[0], TCSETA, &a), ENOTTY);
	EXPECT_ERR(ioctl(pp[0], TIOCSTI, "x"), ENOTTY);

	/* TIOCSTI as nobody, on the controlling terminal and on another. */
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		close(s);
		setsid();
		int c = open(ptsname(m), O_RDWR); /* becomes the controlling tty */
		int legacy = legacy_tiocsti();
		if (c < 0 || setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
		    setresuid(65534, 65534, 65534))
			_exit(125);
		errno = 0;
		long r1 = ioctl(c, TIOCSTI, "q");
		int e1 = errno;
		errno = 0;
		long r2 = ioctl(m, TIOCSTI, "q");
		int e2 = errno;
		int ok1 = legacy ? r1 == 0 : (r1 == -1 && e1 == EIO);
		int ok2 = r2 == -1 && e2 == (legacy ? EPERM : EIO);
		EXPECT_TRUE(ok1);
		EXPECT_TRUE(ok2);
		if (!ok1 || !ok2)
			printf("legacy=%d r1=%ld %s r2=%ld %s\n", legacy, r1, errname(e1), r2,
			       errname(e2));
		_exit(t_failures ? 1 : 0);
	}
	int st;
	EXPECT_TRUE(waitpid(pid, &st, 0) == pid);
	EXPECT(st, 0);
	return t_done();
}
