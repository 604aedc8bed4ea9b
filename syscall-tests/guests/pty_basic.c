/* Pseudo-terminals without job control: openpty/posix_openpt, ptsname,
 * ttyname, isatty, the slave's device number, locking, TIOCGPTPEER, the
 * canonical line discipline (echo, erase, kill, word erase, EOF), raw mode
 * (VMIN/VTIME), output processing, window size, FIONREAD, TCFLSH, poll,
 * and what each end sees when the other closes. Pty numbers are never
 * printed: natively other ptys may be in use. */
#include "t.h"
#include <dirent.h>
#include <poll.h>
#include <pty.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <termios.h>

/* Natively the line discipline runs asynchronously after a master write:
 * read until `want` bytes came or nothing more arrives for a while. */
static int drain(int fd, char *buf, int want)
{
	int got = 0;
	while (got < want) {
		struct pollfd p = { fd, POLLIN, 0 };
		if (poll(&p, 1, 2000) <= 0)
			break;
		ssize_t r = read(fd, buf + got, want - got);
		if (r <= 0)
			break;
		got += r;
	}
	buf[got] = 0;
	return got;
}

/* Prints bytes with control characters escaped. */
static void show(const char *what, const char *b, int n)
{
	printf("%s: \"", what);
	for (int i = 0; i < n; i++) {
		unsigned char c = b[i];
		if (c == '\n')
			printf("\\n");
		else if (c == '\r')
			printf("\\r");
		else if (c < 32 || c == 127)
			printf("\\x%02x", c);
		else
			putchar(c);
	}
	printf("\"\n");
}

/* Nothing arrives on fd within 200 ms. */
static int quiet(int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };
	return poll(&p, 1, 200) == 0;
}

static volatile sig_atomic_t alarms;
static void on_alarm(int s) { (void)s; alarms++; }

int main(void)
{
	int m, s;
	char name[64], buf[8192];
	struct stat st, st2;
	struct termios t, orig;

	EXPECT(openpty(&m, &s, name, NULL, NULL), 0);
	EXPECT_TRUE(strncmp(name, "/dev/pts/", 9) == 0);
	EXPECT_TRUE(strcmp(ptsname(m), name) == 0);
	EXPECT(isatty(m), 1);
	EXPECT(isatty(s), 1);
	int pp[2];
	EXPECT(pipe(pp), 0);
	EXPECT_ERR(isatty(pp[0]) ? 0 : -1, ENOTTY);

	/* The slave is a character device of the devpts major, minor N. */
	unsigned ptn = 0;
	EXPECT(ioctl(m, TIOCGPTN, &ptn), 0);
	EXPECT_TRUE(atoi(name + 9) == (int)ptn);
	EXPECT(fstat(s, &st), 0);
	EXPECT_TRUE(S_ISCHR(st.st_mode));
	EXPECT(major(st.st_rdev), 136);
	EXPECT_TRUE(minor(st.st_rdev) == ptn);
	EXPECT(stat(name, &st2), 0);
	EXPECT_TRUE(st.st_ino == st2.st_ino && st.st_dev == st2.st_dev && st.st_rdev == st2.st_rdev);
	EXPECT(fstat(m, &st), 0);
	EXPECT_TRUE(S_ISCHR(st.st_mode));
	EXPECT(major(st.st_rdev), 5);
	EXPECT(minor(st.st_rdev), 2);
	EXPECT(stat("/dev/ptmx", &st), 0);
	EXPECT_TRUE(S_ISCHR(st.st_mode) && st.st_rdev == makedev(5, 2));
	EXPECT(stat("/dev/tty", &st), 0);
	EXPECT_TRUE(S_ISCHR(st.st_mode) && st.st_rdev == makedev(5, 0));
	EXPECT(stat("/dev/pts", &st), 0);
	EXPECT_TRUE(S_ISDIR(st.st_mode));

	/* ttyname() readlinks /proc/self/fd/N and stats the result. */
	char link[64], path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", s);
	ssize_t ln = readlink(path, link, sizeof link - 1);
	EXPECT_TRUE(ln > 0);
	link[ln > 0 ? ln : 0] = 0;
	EXPECT_TRUE(strcmp(link, name) == 0);
	EXPECT_TRUE(ttyname(s) && strcmp(ttyname(s), name) == 0);
	EXPECT_TRUE(ttyname(pp[0]) == NULL);

	/* /dev/pts lists the slave and ptmx. */
	DIR *d = opendir("/dev/pts");
	EXPECT_TRUE(d != NULL);
	int seen_me = 0, seen_ptmx = 0;
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (strcmp(e->d_name, name + 9) == 0)
			seen_me = 1;
		if (strcmp(e->d_name, "ptmx") == 0)
			seen_ptmx = 1;
	}
	if (d)
		closedir(d);
	EXPECT_TRUE(seen_me);
	EXPECT_TRUE(seen_ptmx);

	/* Master-only ioctls. */
	EXPECT_ERR(ioctl(s, TIOCGPTN, &ptn), ENOTTY);
	EXPECT_ERR(ioctl(s, TIOCGPTPEER, O_RDWR), EIO);
	EXPECT_ERR(ioctl(pp[0], TIOCGPTN, &ptn), ENOTTY);
	EXPECT_ERR(ioctl(s, TCGETS, BADPTR), EFAULT);
	EXPECT_ERR(ioctl(m, TIOCSWINSZ, BADPTR), EFAULT);
	EXPECT_ERR(ioctl(m, TCSETS, BADPTR), EFAULT);
	EXPECT_ERR(ioctl(s, 0x54ff, 0), ENOTTY);
	EXPECT_ERR(ioctl(m, TCFLSH, 5), EINVAL);
	EXPECT_ERR(lseek(s, 0, SEEK_SET), ESPIPE);
	int excl = -1;
	EXPECT(ioctl(s, TIOCEXCL), 0);
	EXPECT(ioctl(s, TIOCGEXCL, &excl), 0);
	EXPECT(excl, 1);
	EXPECT(ioctl(m, TIOCGEXCL, &excl), 0);
	EXPECT(excl, 0);
	EXPECT(ioctl(s, TIOCNXCL), 0);
	EXPECT(ioctl(s, TIOCGEXCL, &excl), 0);
	EXPECT(excl, 0);

	/* A new pair starts locked; unlockpt lets the slave open. */
	int m2 = EXPECT_OK(posix_openpt(O_RDWR | O_NOCTTY));
	int lk = -1;
	EXPECT(ioctl(m2, TIOCGPTLCK, &lk), 0);
	EXPECT(lk, 1);
	char name2[64];
	EXPECT(ptsname_r(m2, name2, sizeof name2), 0);
	EXPECT_ERR(open(name2, O_RDWR | O_NOCTTY), EIO);
	EXPECT_ERR(ioctl(m2, TIOCGPTPEER, O_RDWR | O_NOCTTY), EIO);
	EXPECT(grantpt(m2), 0);
	EXPECT(unlockpt(m2), 0);
	EXPECT(ioctl(m2, TIOCGPTLCK, &lk), 0);
	EXPECT(lk, 0);
	int s2 = EXPECT_OK(open(name2, O_RDWR | O_NOCTTY));
	int s3 = EXPECT_OK(ioctl(m2, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
	EXPECT(fcntl(s3, F_GETFD), FD_CLOEXEC);
	EXPECT(fstat(s2, &st), 0);
	EXPECT(fstat(s3, &st2), 0);
	EXPECT_TRUE(st.st_rdev == st2.st_rdev && st.st_ino == st2.st_ino);
	EXPECT_TRUE(ttyname(s3) && strcmp(ttyname(s3), name2) == 0);

	/* The master's termios is the slave's. */
	EXPECT(tcgetattr(s, &orig), 0);
	EXPECT(tcgetattr(m, &t), 0);
	EXPECT_TRUE(memcmp(&t, &orig, sizeof t) == 0);
	EXPECT_TRUE((orig.c_lflag & (ICANON | ECHO | ECHOE | ECHOK | ISIG | IEXTEN)) ==
		    (ICANON | ECHO | ECHOE | ECHOK | ISIG | IEXTEN));
	EXPECT_TRUE((orig.c_iflag & ICRNL) && (orig.c_oflag & (OPOST | ONLCR)) == (OPOST | ONLCR));
	EXPECT(orig.c_cc[VERASE], 0177);
	EXPECT(orig.c_cc[VKILL], 025);
	EXPECT(orig.c_cc[VEOF], 004);
	EXPECT(orig.c_cc[VINTR], 003);
	EXPECT(orig.c_cc[VMIN], 1);
	EXPECT(orig.c_cc[VTIME], 0);
	EXPECT(cfgetospeed(&orig), B38400);

	/* termios2 (TCGETS2/TCSETS2) carries the same modes plus the speeds. */
	struct k_termios2 {
		tcflag_t iflag, oflag, cflag, lflag;
		cc_t line, cc[19];
		speed_t ispeed, ospeed;
	} t2;
	EXPECT(ioctl(s, 0x802c542a /* TCGETS2 */, &t2), 0);
	EXPECT_TRUE(t2.iflag == orig.c_iflag && t2.oflag == orig.c_oflag &&
		    t2.lflag == orig.c_lflag && memcmp(t2.cc, orig.c_cc, 19) == 0);
	EXPECT(t2.ispeed, 38400);
	EXPECT(t2.ospeed, 38400);
	t2.lflag &= ~ECHOCTL;
	EXPECT(ioctl(m, 0x402c542b /* TCSETS2 */, &t2), 0);
	EXPECT(tcgetattr(s, &t), 0);
	EXPECT_TRUE((t.c_lflag & ECHOCTL) == 0);
	EXPECT_ERR(ioctl(s, 0x802c542a, BADPTR), EFAULT);
	EXPECT(tcsetattr(s, TCSANOW, &orig), 0);

	/* Canonical mode: erase, kill and word erase edit the line; CR is
	 * read as NL; echoes come back on the master. */
	int n;
	EXPECT(write(m, "helo\177lo\r", 8), 8);
	n = EXPECT(read(s, buf, sizeof buf), 6);
	show("line", buf, n);
	n = drain(m, buf, 11);
	show("echo", buf, n);
	EXPECT(write(m, "abc\025xy foo\027bar\n", 15), 15);
	n = EXPECT(read(s, buf, sizeof buf), 7);
	show("line", buf, n);
	n = drain(m, buf, 32);
	show("echo", buf, n);
	/* One line per read, even when more are queued. */
	EXPECT(write(m, "one\ntwo\n", 8), 8);
	n = EXPECT(read(s, buf, sizeof buf), 4);
	show("line", buf, n);
	n = EXPECT(read(s, buf, 2), 2);
	show("part", buf, n);
	n = EXPECT(read(s, buf, sizeof buf), 2);
	show("rest", buf, n);
	n = drain(m, buf, 10);
	show("echo", buf, n);
	/* VEOF ends a line without itself; at a line start it reads 0. */
	EXPECT(write(m, "ab\004", 3), 3);
	n = EXPECT(read(s, buf, sizeof buf), 2);
	show("eof line", buf, n);
	EXPECT(write(m, "\004", 1), 1);
	EXPECT(read(s, buf, sizeof buf), 0);
	n = drain(m, buf, 2);
	show("echo", buf, n);
	/* Control characters echo as ^X; FIONREAD counts complete lines. */
	EXPECT(write(m, "\001x\nhalf", 7), 7);
	n = EXPECT(read(s, buf, sizeof buf), 3);
	n = drain(m, buf, 9);
	show("echo", buf, n);
	EXPECT(ioctl(s, FIONREAD, &n), 0);
	EXPECT(n, 0);
	/* Non-blocking read of an incomplete line: EAGAIN. */
	int fl = fcntl(s, F_GETFL);
	EXPECT(fcntl(s, F_SETFL, fl | O_NONBLOCK), 0);
	EXPECT_ERR(read(s, buf, sizeof buf), EAGAIN);
	EXPECT(fcntl(s, F_SETFL, fl), 0);
	/* TCFLSH drops it. */
	EXPECT(tcflush(s, TCIFLUSH), 0);
	EXPECT(write(m, "new\n", 4), 4);
	n = EXPECT(read(s, buf, sizeof buf), 4);
	show("after flush", buf, n);
	drain(m, buf, 5);

	/* Output processing: ONLCR turns NL into CR NL. */
	EXPECT(write(s, "out\n", 4), 4);
	n = drain(m, buf, 5);
	show("output", buf, n);
	EXPECT(ioctl(s, TIOCOUTQ, &n), 0);
	EXPECT(n, 0);
	EXPECT(write(s, "12345", 5), 5);
	for (int i = 0; i < 100; i++) {
		if (ioctl(m, FIONREAD, &n) == 0 && n == 5)
			break;
		usleep(10000);
	}
	EXPECT(n, 5);
	drain(m, buf, 5);

	/* IXON: ^S stops the slave's output, ^Q starts it again. */
	EXPECT(write(m, "\023", 1), 1);
	struct pollfd po = { s, POLLOUT, 0 };
	for (int i = 0; i < 100 && poll(&po, 1, 0) == 1; i++)
		usleep(10000);
	EXPECT(poll(&po, 1, 0), 0);
	EXPECT(fcntl(s, F_SETFL, fl | O_NONBLOCK), 0);
	EXPECT_ERR(write(s, "held", 4), EAGAIN);
	EXPECT(write(m, "\021", 1), 1);
	EXPECT(poll(&po, 1, 2000), 1);
	EXPECT(write(s, "go", 2), 2);
	EXPECT(fcntl(s, F_SETFL, fl), 0);
	n = drain(m, buf, 2);
	show("after ^Q", buf, n);
	/* VLNEXT quotes the next character. */
	EXPECT(write(m, "a\026\177b\n", 5), 5);
	n = EXPECT(read(s, buf, sizeof buf), 4);
	show("quoted", buf, n);
	n = drain(m, buf, 9);
	show("echo", buf, n);

	/* No echo: nothing comes back, the line still arrives; ECHONL echoes
	 * only the newline. */
	t = orig;
	t.c_lflag &= ~ECHO;
	EXPECT(tcsetattr(s, TCSANOW, &t), 0);
	EXPECT(write(m, "secret\n", 7), 7);
	n = EXPECT(read(s, buf, sizeof buf), 7);
	EXPECT_TRUE(quiet(m));
	t.c_lflag |= ECHONL;
	EXPECT(tcsetattr(s, TCSANOW, &t), 0);
	EXPECT(write(m, "pw\n", 3), 3);
	n = EXPECT(read(s, buf, sizeof buf), 3);
	n = drain(m, buf, 2);
	show("echonl", buf, n);

	/* Raw mode: bytes as they come, no echo, no output processing. */
	t = orig;
	cfmakeraw(&t);
	EXPECT(tcsetattr(s, TCSAFLUSH, &t), 0);
	EXPECT(tcgetattr(m, &t), 0);
	EXPECT_TRUE((t.c_lflag & (ICANON | ECHO | ISIG)) == 0 && (t.c_oflag & OPOST) == 0);
	EXPECT(write(m, "r\003w\r", 4), 4);
	for (int i = 0; i < 100; i++) {
		if (ioctl(s, FIONREAD, &n) == 0 && n == 4)
			break;
		usleep(10000);
	}
	EXPECT(n, 4);
	n = EXPECT(read(s, buf, sizeof buf), 4);
	show("raw", buf, n);
	EXPECT_TRUE(quiet(m));
	EXPECT(write(s, "a\nb", 3), 3);
	n = drain(m, buf, 3);
	show("raw output", buf, n);
	/* VMIN=0, VTIME=0: a read returns at once. */
	t.c_cc[VMIN] = 0;
	t.c_cc[VTIME] = 0;
	EXPECT(tcsetattr(s, TCSANOW, &t), 0);
	EXPECT(read(s, buf, sizeof buf), 0);
	/* VMIN=0, VTIME=1: waits a tenth of a second, then 0. */
	t.c_cc[VTIME] = 1;
	EXPECT(tcsetattr(s, TCSANOW, &t), 0);
	EXPECT(read(s, buf, sizeof buf), 0);
	/* VMIN=2: waits for two bytes. */
	t.c_cc[VMIN] = 2;
	t.c_cc[VTIME] = 0;
	EXPECT(tcsetattr(s, TCSANOW, &t), 0);
	EXPECT(write(m, "x", 1), 1);
	EXPECT(write(m, "y", 1), 1);
	n = EXPECT(read(s, buf, sizeof buf), 2);
	show("vmin", buf, n);
	/* Switching back to canonical mode. */
	EXPECT(tcsetattr(s, TCSANOW, &orig), 0);

	/* A blocking read is interrupted by a signal. */
	struct sigaction sa = { 0 };
	sa.sa_handler = on_alarm;
	EXPECT(sigaction(SIGALRM, &sa, NULL), 0);
	alarm(1);
	EXPECT_ERR(read(s, buf, sizeof buf), EINTR);
	EXPECT(alarms, 1);

	/* Window size: set on the master, seen on the slave. */
	struct winsize ws = { 0 };
	EXPECT(ioctl(s, TIOCGWINSZ, &ws), 0);
	EXPECT(ws.ws_row, 0);
	ws.ws_row = 24;
	ws.ws_col = 80;
	EXPECT(ioctl(m, TIOCSWINSZ, &ws), 0);
	memset(&ws, 0, sizeof ws);
	EXPECT(ioctl(s, TIOCGWINSZ, &ws), 0);
	EXPECT(ws.ws_row, 24);
	EXPECT(ws.ws_col, 80);

	/* Readiness. */
	struct pollfd pf[2] = { { s, POLLIN | POLLOUT, 0 }, { m, POLLIN | POLLOUT, 0 } };
	EXPECT(poll(pf, 2, 0), 2);
	EXPECT(pf[0].revents, POLLOUT);
	EXPECT(pf[1].revents, POLLOUT);
	EXPECT(write(m, "ready\n", 6), 6);
	pf[0].revents = 0;
	EXPECT(poll(pf, 1, 2000), 1);
	EXPECT(pf[0].revents, POLLIN | POLLOUT);
	EXPECT(read(s, buf, sizeof buf), 6);
	drain(m, buf, 7);

	/* Edge-triggered epoll on the master: one event per arrival. */
	int ep = EXPECT_OK(epoll_create1(EPOLL_CLOEXEC));
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.u32 = 7 };
	EXPECT(epoll_ctl(ep, EPOLL_CTL_ADD, m, &ev), 0);
	EXPECT(epoll_wait(ep, &ev, 1, 0), 0);
	EXPECT(write(s, "e1", 2), 2);
	EXPECT(epoll_wait(ep, &ev, 1, 2000), 1);
	EXPECT(ev.events, EPOLLIN);
	EXPECT(ev.data.u32, 7);
	EXPECT(epoll_wait(ep, &ev, 1, 0), 0);
	EXPECT(write(s, "e2", 2), 2);
	EXPECT(epoll_wait(ep, &ev, 1, 2000), 1);
	n = drain(m, buf, 4);
	show("epoll", buf, n);
	EXPECT(close(ep), 0);

	/* The slave closes: the master reads what is left, then EIO. */
	EXPECT(write(s, "bye", 3), 3);
	EXPECT(close(s), 0);
	n = drain(m, buf, 3);
	show("left", buf, n);
	EXPECT_ERR(read(m, buf, sizeof buf), EIO);
	pf[1].revents = 0;
	EXPECT(poll(&pf[1], 1, 0), 1);
	EXPECT(pf[1].revents, POLLOUT | POLLHUP);
	EXPECT(write(m, "x", 1), 1);

	/* The master closes: the slave is hung up (reads 0, writes EIO) and
	 * its node goes from /dev/pts. */
	EXPECT(write(m2, "pending\n", 8), 8);
	EXPECT(close(m2), 0);
	struct pollfd ps = { s2, POLLIN | POLLOUT, 0 };
	EXPECT(poll(&ps, 1, 0), 1);
	EXPECT(ps.revents, POLLIN | POLLOUT | POLLERR | POLLHUP);
	EXPECT(read(s2, buf, sizeof buf), 0);
	EXPECT_ERR(write(s2, "x", 1), EIO);
	EXPECT_ERR(tcgetattr(s2, &t), EIO);
	EXPECT_ERR(ioctl(s2, TIOCSPGRP, &n), ENOTTY);
	EXPECT_ERR(access(name2, F_OK), ENOENT);
	EXPECT(close(s2), 0);
	EXPECT(close(s3), 0);
	EXPECT(close(m), 0);

	/* Bounded queues: with nobody reading, non-blocking writes on either
	 * end stop with EAGAIN. */
	int m4, s4;
	EXPECT(openpty(&m4, &s4, NULL, NULL, NULL), 0);
	EXPECT(tcgetattr(s4, &t), 0);
	cfmakeraw(&t);
	EXPECT(tcsetattr(s4, TCSANOW, &t), 0);
	EXPECT(fcntl(m4, F_SETFL, O_RDWR | O_NONBLOCK), 0);
	EXPECT(fcntl(s4, F_SETFL, O_RDWR | O_NONBLOCK), 0);
	static char big[1 << 16];
	memset(big, 'x', sizeof big);
	for (int side = 0; side < 2; side++) {
		long total = 0;
		ssize_t r = 0;
		for (int i = 0; i < 256; i++) {
			r = write(side ? m4 : s4, big, sizeof big);
			if (r <= 0)
				break;
			total += r;
		}
		EXPECT_TRUE(r == -1 && errno == EAGAIN);
		EXPECT_TRUE(total > 0 && total < (1 << 22));
	}
	EXPECT(close(s4), 0);
	EXPECT(close(m4), 0);

	/* /dev/ptmx opened by name; no controlling terminal in a new
	 * session, so /dev/tty is ENXIO there. */
	int m3 = EXPECT_OK(open("/dev/ptmx", O_RDWR | O_NOCTTY));
	EXPECT(ioctl(m3, TIOCGPTN, &ptn), 0);
	EXPECT(close(m3), 0);
	pid_t c = fork();
	if (c == 0) {
		setsid();
		int r = open("/dev/tty", O_RDWR);
		_exit(r == -1 && errno == ENXIO ? 0 : 1);
	}
	int wst;
	EXPECT_TRUE(waitpid(c, &wst, 0) == c);
	EXPECT(WEXITSTATUS(wst), 0);
	return t_done();
}
