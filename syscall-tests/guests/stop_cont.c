/* SIGSTOP/SIGCONT of a child seen through WUNTRACED/WCONTINUED (waitpid)
 * and WSTOPPED/WCONTINUED (waitid), SIGCHLD with CLD_STOPPED/CLD_CONTINUED,
 * and SIGKILL to a stopped child. */
#include "t.h"
#include <sys/wait.h>

static volatile int last_code;
static void on_chld(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	last_code = si->si_code;
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_chld;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	EXPECT(sigaction(SIGCHLD, &sa, NULL), 0);

	int p[2];
	EXPECT(pipe(p), 0);
	pid_t c = fork();
	if (c == 0) {
		/* A process group of its own, whose parent is in another group of
		 * the same session: never orphaned, so SIGTSTP stops it wherever
		 * the test itself was started. */
		setpgid(0, 0);
		close(p[0]);
		/* Count while running: writes one byte every 20 ms. */
		for (;;) {
			write(p[1], "x", 1);
			usleep(20000);
		}
	}
	setpgid(c, c);
	close(p[1]);
	char b;
	EXPECT(read(p[0], &b, 1), 1);
	int st;
	EXPECT(kill(c, SIGSTOP), 0);
	EXPECT_TRUE(waitpid(c, &st, WUNTRACED) == c);
	EXPECT_TRUE(WIFSTOPPED(st));
	EXPECT(WSTOPSIG(st), SIGSTOP);
	/* The stopping child marks itself stopped before it signals its
	 * parent, so waitpid can return before SIGCHLD is delivered. */
	for (int i = 0; i < 200 && last_code != CLD_STOPPED; i++)
		usleep(10000);
	EXPECT(last_code, CLD_STOPPED);
	/* The stop is reported once. */
	EXPECT(waitpid(c, &st, WUNTRACED | WNOHANG), 0);
	/* Stopped: no more bytes (drain what was written before the stop). */
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	usleep(100000);
	while (read(p[0], &b, 1) == 1)
		;
	usleep(100000);
	EXPECT_ERR(read(p[0], &b, 1), EAGAIN);

	EXPECT(kill(c, SIGCONT), 0);
	EXPECT_TRUE(waitpid(c, &st, WCONTINUED) == c);
	EXPECT_TRUE(WIFCONTINUED(st));
	/* Linux sends CLD_CONTINUED when the child next runs, which may be
	 * after waitpid has already seen the state change. */
	for (int i = 0; i < 200 && last_code != CLD_CONTINUED; i++)
		usleep(10000);
	EXPECT(last_code, CLD_CONTINUED);
	fcntl(p[0], F_SETFL, 0);
	EXPECT(read(p[0], &b, 1), 1);

	/* waitid's view: stop with SIGTSTP (also stops by default). */
	EXPECT(kill(c, SIGTSTP), 0);
	siginfo_t si;
	memset(&si, 0, sizeof si);
	EXPECT(waitid(P_PID, c, &si, WSTOPPED), 0);
	EXPECT(si.si_code, CLD_STOPPED);
	EXPECT(si.si_status, SIGTSTP);
	EXPECT_TRUE(si.si_pid == c);
	EXPECT(kill(c, SIGCONT), 0);
	memset(&si, 0, sizeof si);
	EXPECT(waitid(P_PID, c, &si, WCONTINUED), 0);
	EXPECT(si.si_code, CLD_CONTINUED);
	EXPECT(si.si_status, SIGCONT);

	/* Stop again, then SIGKILL the stopped child: it dies. */
	EXPECT(kill(c, SIGSTOP), 0);
	EXPECT_TRUE(waitpid(c, &st, WUNTRACED) == c);
	EXPECT_TRUE(WIFSTOPPED(st));
	EXPECT(kill(c, SIGKILL), 0);
	EXPECT_TRUE(waitpid(c, &st, 0) == c);
	EXPECT_TRUE(WIFSIGNALED(st));
	EXPECT(WTERMSIG(st), SIGKILL);
	EXPECT_ERR(waitpid(c, &st, 0), ECHILD);

	/* SIGTERM to a stopped child with a default action: it dies too (the
	 * kernel wakes it to die) once continued... Linux delivers fatal
	 * signals to stopped tasks only for SIGKILL; SIGTERM stays pending until
	 * SIGCONT. */
	c = fork();
	if (c == 0) {
		for (;;)
			pause();
	}
	EXPECT(kill(c, SIGSTOP), 0);
	EXPECT_TRUE(waitpid(c, &st, WUNTRACED) == c);
	EXPECT(kill(c, SIGTERM), 0);
	usleep(100000);
	EXPECT(waitpid(c, &st, WNOHANG), 0);
	EXPECT(kill(c, SIGCONT), 0);
	EXPECT_TRUE(waitpid(c, &st, 0) == c);
	EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
	return t_done();
}
