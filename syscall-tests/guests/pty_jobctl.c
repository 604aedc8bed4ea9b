/* Pseudo-terminals as controlling terminals: a session leader takes the
 * slave (TIOCSCTTY), ^C/^\/^Z signal the foreground group, tcsetpgrp
 * moves the foreground, a background group touching the terminal gets
 * SIGTTIN/SIGTTOU (or EIO when they are ignored or its group is orphaned),
 * job-control stops are discarded in an orphaned group, SIGWINCH follows a
 * window size change, and the master's close hangs the session up.
 *
 * Everything runs in a child that made its own session: natively the test
 * process may have a controlling terminal of its own, the sandboxed one
 * has none. Grandchildren report by exit status only. */
#include "t.h"
#include <poll.h>
#include <pty.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <termios.h>

static volatile sig_atomic_t got[65];
static void on_sig(int s) { got[s]++; }

static void catch(int sig)
{
	struct sigaction sa = { 0 };
	sa.sa_handler = on_sig;
	sigaction(sig, &sa, NULL);
}

/* Waits up to two seconds for signal `sig` to have arrived `n` times. */
static int wait_sig(int sig, int n)
{
	for (int i = 0; i < 200 && got[sig] < n; i++)
		usleep(10000);
	return got[sig];
}

static int drain(int fd, char *buf, int want)
{
	int n = 0;
	while (n < want) {
		struct pollfd p = { fd, POLLIN, 0 };
		if (poll(&p, 1, 2000) <= 0)
			break;
		ssize_t r = read(fd, buf + n, want - n);
		if (r <= 0)
			break;
		n += r;
	}
	buf[n] = 0;
	return n;
}

enum { READ_DFL, READ_IGN, READ_BLOCKED, WRITE_PLAIN, WRITE_TOSTOP, WRITE_TOSTOP_IGN,
       SETATTR, SETPGRP_IGN };

/* Runs `what` in a new background process group; returns its wait status
 * (a stopped child is killed after the stop is seen). */
static int background(int s, int what)
{
	pid_t c = fork();
	if (c == 0) {
		setpgid(0, 0);
		char b[16];
		struct termios t;
		sigset_t set;
		switch (what) {
		case READ_DFL:
			read(s, b, sizeof b);
			_exit(1);
		case READ_IGN:
			signal(SIGTTIN, SIG_IGN);
			_exit(read(s, b, sizeof b) == -1 && errno == EIO ? 10 : 1);
		case READ_BLOCKED:
			sigemptyset(&set);
			sigaddset(&set, SIGTTIN);
			sigprocmask(SIG_BLOCK, &set, NULL);
			_exit(read(s, b, sizeof b) == -1 && errno == EIO ? 11 : 1);
		case WRITE_PLAIN:
			_exit(write(s, "bg", 2) == 2 ? 12 : 1);
		case WRITE_TOSTOP:
			write(s, "bg", 2);
			_exit(1);
		case WRITE_TOSTOP_IGN:
			signal(SIGTTOU, SIG_IGN);
			_exit(write(s, "bg", 2) == 2 ? 13 : 1);
		case SETATTR:
			tcgetattr(s, &t);
			tcsetattr(s, TCSANOW, &t);
			_exit(1);
		case SETPGRP_IGN:
			signal(SIGTTOU, SIG_IGN);
			_exit(tcsetpgrp(s, getpgrp()) == 0 ? 14 : 1);
		}
		_exit(2);
	}
	setpgid(c, c);
	int st = 0;
	waitpid(c, &st, WUNTRACED);
	if (WIFSTOPPED(st)) {
		kill(c, SIGKILL);
		int st2;
		waitpid(c, &st2, 0);
	}
	return st;
}

static void session(int m, int s)
{
	char buf[256];
	int n;
	EXPECT_TRUE(setsid() == getpid());
	/* Not yet anybody's controlling terminal. */
	EXPECT_ERR(open("/dev/tty", O_RDWR), ENXIO);
	EXPECT_ERR(tcgetpgrp(s), ENOTTY);
	EXPECT_ERR(tcgetsid(s), ENOTTY);
	EXPECT_ERR(ioctl(s, TIOCNOTTY), ENOTTY);
	EXPECT(ioctl(m, TIOCGPGRP, &n), 0);
	EXPECT(n, 0);
	/* Only for reading descriptors... and only once. */
	EXPECT(ioctl(s, TIOCSCTTY, 0), 0);
	EXPECT(ioctl(s, TIOCSCTTY, 0), 0);
	EXPECT_TRUE(tcgetsid(s) == getpid());
	EXPECT_TRUE(tcgetpgrp(s) == getpid());
	EXPECT(ioctl(m, TIOCGPGRP, &n), 0);
	EXPECT_TRUE(n == getpid());
	int tty = EXPECT_OK(open("/dev/tty", O_RDWR));
	struct stat st;
	EXPECT(fstat(tty, &st), 0);
	EXPECT_TRUE(st.st_rdev == makedev(5, 0));
	EXPECT_TRUE(ttyname(tty) && strcmp(ttyname(tty), "/dev/tty") == 0);
	/* /dev/tty is the same terminal. */
	EXPECT(write(tty, "via tty\n", 8), 8);
	n = drain(m, buf, 9);
	EXPECT(n, 9);
	EXPECT(close(tty), 0);

	/* The children share it. */
	pid_t c = fork();
	if (c == 0)
		_exit(tcgetsid(s) == getppid() && open("/dev/tty", O_RDONLY) >= 0 ? 0 : 1);
	int wst;
	EXPECT_TRUE(waitpid(c, &wst, 0) == c);
	EXPECT(WEXITSTATUS(wst), 0);

	/* Terminal signals go to the foreground group (us). */
	catch(SIGINT);
	catch(SIGQUIT);
	catch(SIGTSTP);
	catch(SIGWINCH);
	EXPECT(write(m, "partial", 7), 7);
	EXPECT(drain(m, buf, 7), 7);
	EXPECT(write(m, "\003", 1), 1);
	EXPECT(wait_sig(SIGINT, 1), 1);
	n = drain(m, buf, 2);
	EXPECT_TRUE(strcmp(buf, "^C") == 0);
	/* The interrupted line was discarded. */
	EXPECT(write(m, "next\n", 5), 5);
	n = EXPECT(read(s, buf, sizeof buf), 5);
	drain(m, buf, 6);
	EXPECT(write(m, "\034", 1), 1);
	EXPECT(wait_sig(SIGQUIT, 1), 1);
	EXPECT(write(m, "\032", 1), 1);
	EXPECT(wait_sig(SIGTSTP, 1), 1);
	drain(m, buf, 4);
	/* TIOCSIG on the master raises them too, and only them. */
	EXPECT(ioctl(m, TIOCSIG, SIGINT), 0);
	EXPECT(wait_sig(SIGINT, 2), 2);
	EXPECT_ERR(ioctl(m, TIOCSIG, SIGTERM), EINVAL);
	EXPECT_ERR(ioctl(s, TIOCSIG, SIGINT), ENOTTY);
	/* Without ISIG they are just bytes. */
	struct termios t, orig;
	EXPECT(tcgetattr(s, &orig), 0);
	t = orig;
	t.c_lflag &= ~ISIG;
	EXPECT(tcsetattr(s, TCSANOW, &t), 0);
	EXPECT(write(m, "\003\n", 2), 2);
	EXPECT(read(s, buf, sizeof buf), 2);
	EXPECT(buf[0], 3);
	EXPECT(got[SIGINT], 2);
	EXPECT(tcsetattr(s, TCSANOW, &orig), 0);
	drain(m, buf, 4);

	/* SIGWINCH on a change of size only. */
	struct winsize ws = { .ws_row = 30, .ws_col = 100 };
	EXPECT(ioctl(m, TIOCSWINSZ, &ws), 0);
	EXPECT(wait_sig(SIGWINCH, 1), 1);
	EXPECT(ioctl(s, TIOCSWINSZ, &ws), 0);
	usleep(100000);
	EXPECT(got[SIGWINCH], 1);

	/* Background groups. */
	EXPECT(write(m, "for bg\n", 7), 7);
	int bst = background(s, READ_DFL);
	EXPECT_TRUE(WIFSTOPPED(bst) && WSTOPSIG(bst) == SIGTTIN);
	bst = background(s, READ_IGN);
	EXPECT_TRUE(WIFEXITED(bst) && WEXITSTATUS(bst) == 10);
	bst = background(s, READ_BLOCKED);
	EXPECT_TRUE(WIFEXITED(bst) && WEXITSTATUS(bst) == 11);
	bst = background(s, WRITE_PLAIN);
	EXPECT_TRUE(WIFEXITED(bst) && WEXITSTATUS(bst) == 12);
	bst = background(s, SETATTR);
	EXPECT_TRUE(WIFSTOPPED(bst) && WSTOPSIG(bst) == SIGTTOU);
	t = orig;
	t.c_lflag |= TOSTOP;
	EXPECT(tcsetattr(s, TCSANOW, &t), 0);
	bst = background(s, WRITE_TOSTOP);
	EXPECT_TRUE(WIFSTOPPED(bst) && WSTOPSIG(bst) == SIGTTOU);
	bst = background(s, WRITE_TOSTOP_IGN);
	EXPECT_TRUE(WIFEXITED(bst) && WEXITSTATUS(bst) == 13);
	EXPECT(tcsetattr(s, TCSANOW, &orig), 0);
	/* The line written for the background readers is still there. */
	n = EXPECT(read(s, buf, sizeof buf), 7);
	drain(m, buf, 12);

	/* A background job made foreground reads the terminal. */
	int sync[2];
	EXPECT(pipe(sync), 0);
	c = fork();
	if (c == 0) {
		setpgid(0, 0);
		char b;
		read(sync[0], &b, 1);
		char line[16];
		ssize_t r = read(s, line, sizeof line);
		_exit(r == 3 && memcmp(line, "fg\n", 3) == 0 ? 20 : 1);
	}
	setpgid(c, c);
	EXPECT_ERR(tcsetpgrp(s, 999999), ESRCH);
	EXPECT_ERR(tcsetpgrp(s, -1), EINVAL);
	EXPECT_ERR(tcsetpgrp(s, 1), EPERM);
	EXPECT(tcsetpgrp(s, c), 0);
	EXPECT_TRUE(tcgetpgrp(s) == c);
	/* We are the background now and our group is orphaned (our parent is
	 * in another session): reading is EIO, job-control stops are
	 * discarded, and taking the terminal back needs SIGTTOU ignored. */
	char b;
	EXPECT_ERR(read(s, &b, 1), EIO);
	signal(SIGTSTP, SIG_DFL);
	EXPECT(raise(SIGTSTP), 0);
	EXPECT_TRUE(1);
	EXPECT(write(m, "fg\n", 3), 3);
	EXPECT(write(sync[1], "g", 1), 1);
	EXPECT_TRUE(waitpid(c, &wst, 0) == c);
	EXPECT_TRUE(WIFEXITED(wst) && WEXITSTATUS(wst) == 20);
	drain(m, buf, 4);
	signal(SIGTTOU, SIG_IGN);
	EXPECT(tcsetpgrp(s, getpgrp()), 0);
	signal(SIGTTOU, SIG_DFL);
	EXPECT_TRUE(tcgetpgrp(s) == getpid());
	bst = background(s, SETPGRP_IGN);
	EXPECT_TRUE(WIFEXITED(bst) && WEXITSTATUS(bst) == 14);
	signal(SIGTTOU, SIG_IGN);
	EXPECT(tcsetpgrp(s, getpgrp()), 0);
	signal(SIGTTOU, SIG_DFL);

	/* The master's close hangs up: SIGHUP to the session leader, and the
	 * terminal is nobody's controlling terminal any more. */
	catch(SIGHUP);
	catch(SIGCONT);
	EXPECT(close(m), 0);
	EXPECT(wait_sig(SIGHUP, 1), 1);
	EXPECT(wait_sig(SIGCONT, 1), 1);
	EXPECT_ERR(open("/dev/tty", O_RDWR), ENXIO);
	EXPECT(read(s, buf, sizeof buf), 0);
	EXPECT_ERR(tcgetpgrp(s), EIO);
}

/* A second session whose leader exits: its foreground group gets SIGHUP. */
static void leader_exit(void)
{
	int m, s, p[2];
	EXPECT(openpty(&m, &s, NULL, NULL, NULL), 0);
	EXPECT(pipe(p), 0);
	pid_t leader = fork();
	if (leader == 0) {
		setsid();
		ioctl(s, TIOCSCTTY, 0);
		pid_t member = fork();
		if (member == 0) {
			/* Same (foreground) group as the leader. */
			catch(SIGHUP);
			write(p[1], "r", 1);
			for (int i = 0; i < 300 && !got[SIGHUP]; i++)
				usleep(10000);
			write(p[1], got[SIGHUP] ? "h" : "n", 1);
			_exit(0);
		}
		char b;
		read(p[0], &b, 1);
		_exit(0);
	}
	char r[2] = { 0 };
	/* The leader reads the member's "r" before exiting; the member then
	 * reports whether SIGHUP came. */
	int wst;
	EXPECT_TRUE(waitpid(leader, &wst, 0) == leader);
	EXPECT(read(p[0], &r[0], 1), 1);
	EXPECT(r[0], 'h');
	close(m);
	close(s);
}

/* A stopped group that loses its last link to its session (the exit of
 * the parent that was in another group of the session) gets SIGHUP and
 * SIGCONT, so it does not stay stopped forever. */
static void orphan_hangup(void)
{
	int p[2];
	EXPECT(pipe(p), 0);
	pid_t c = fork();
	if (c == 0) {
		setsid();
		pid_t x = fork();
		if (x == 0) {
			pid_t g = fork();
			if (g == 0) {
				setpgid(0, 0);
				catch(SIGHUP);
				raise(SIGSTOP);
				write(p[1], got[SIGHUP] ? "h" : "n", 1);
				_exit(0);
			}
			setpgid(g, g);
			int st;
			waitpid(g, &st, WUNTRACED);
			_exit(WIFSTOPPED(st) ? 0 : 1);
		}
		int st;
		waitpid(x, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			_exit(2);
		char b = 0;
		struct pollfd pf = { p[0], POLLIN, 0 };
		if (poll(&pf, 1, 5000) == 1)
			read(p[0], &b, 1);
		_exit(b == 'h' ? 0 : 3);
	}
	int wst;
	EXPECT_TRUE(waitpid(c, &wst, 0) == c);
	EXPECT_TRUE(WIFEXITED(wst));
	EXPECT(WEXITSTATUS(wst), 0);
	close(p[0]);
	close(p[1]);
}

/* The master's close kills a session leader that keeps SIGHUP's default
 * action; its exit then hangs up what was the foreground group. */
static void hangup_old_pgrp(void)
{
	int m, s, p[2], go[2];
	EXPECT(openpty(&m, &s, NULL, NULL, NULL), 0);
	EXPECT(pipe(p), 0);
	EXPECT(pipe(go), 0);
	pid_t leader = fork();
	if (leader == 0) {
		close(m);
		setsid();
		ioctl(s, TIOCSCTTY, 0);
		signal(SIGTTOU, SIG_IGN);
		pid_t f = fork();
		if (f == 0) {
			setpgid(0, 0);
			catch(SIGHUP);
			write(p[1], "r", 1);
			for (int i = 0; i < 500 && !got[SIGHUP]; i++)
				usleep(10000);
			write(p[1], got[SIGHUP] ? "h" : "n", 1);
			_exit(0);
		}
		setpgid(f, f);
		tcsetpgrp(s, f);
		char b;
		read(p[0], &b, 1);
		write(go[1], "x", 1);
		for (;;)
			pause();
	}
	close(s);
	char b = 0;
	EXPECT(read(go[0], &b, 1), 1);
	EXPECT(close(m), 0);
	int wst;
	EXPECT_TRUE(waitpid(leader, &wst, 0) == leader);
	EXPECT_TRUE(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGHUP);
	EXPECT(read(p[0], &b, 1), 1);
	EXPECT(b, 'h');
	close(p[0]);
	close(p[1]);
	close(go[0]);
	close(go[1]);
}

/* TIOCNOTTY: a member gives up only its own controlling terminal; the
 * session leader gives it up for the whole session, and the foreground
 * group (here its own) gets SIGHUP and SIGCONT. */
static void notty(void)
{
	int m, s;
	EXPECT(openpty(&m, &s, NULL, NULL, NULL), 0);
	pid_t leader = fork();
	if (leader == 0) {
		setsid();
		int ok = ioctl(s, TIOCSCTTY, 0) == 0;
		pid_t c = fork();
		if (c == 0) {
			int r = ioctl(s, TIOCNOTTY) == 0 && open("/dev/tty", O_RDWR) == -1 &&
				errno == ENXIO && ioctl(s, TIOCNOTTY) == -1 && errno == ENOTTY;
			_exit(r ? 0 : 1);
		}
		int st;
		waitpid(c, &st, 0);
		ok = ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
		/* Still ours after the member let go. */
		int fd = open("/dev/tty", O_RDWR);
		ok = ok && fd >= 0;
		close(fd);
		catch(SIGHUP);
		catch(SIGCONT);
		ok = ok && ioctl(s, TIOCNOTTY) == 0;
		ok = ok && wait_sig(SIGHUP, 1) == 1 && wait_sig(SIGCONT, 1) == 1;
		ok = ok && open("/dev/tty", O_RDWR) == -1 && errno == ENXIO;
		ok = ok && tcgetsid(s) == -1 && errno == ENOTTY;
		/* Free again: the leader may take it back. */
		ok = ok && ioctl(s, TIOCSCTTY, 0) == 0 && tcgetsid(s) == getpid();
		_exit(ok ? 0 : 1);
	}
	close(m);
	close(s);
	int wst;
	EXPECT_TRUE(waitpid(leader, &wst, 0) == leader);
	EXPECT_TRUE(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
}

int main(void)
{
	int m, s;
	EXPECT(openpty(&m, &s, NULL, NULL, NULL), 0);
	pid_t c = fork();
	if (c == 0) {
		session(m, s);
		fflush(stdout);
		_exit(t_failures ? 1 : 0);
	}
	/* Only the child holds the master now, so its close hangs up. */
	close(m);
	close(s);
	int wst;
	EXPECT_TRUE(waitpid(c, &wst, 0) == c);
	EXPECT_TRUE(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
	leader_exit();
	orphan_hangup();
	hangup_old_pgrp();
	notty();
	return t_done();
}
