/* SIGCHLD on child exit (with si_code/si_pid/si_status), waitid's siginfo
 * for exit and death by signal, WNOWAIT, and SA_NOCLDWAIT-free reaping. */
#include "t.h"
#include <sys/wait.h>

static volatile int chld_count, chld_code, chld_status;
static volatile pid_t chld_pid;

static void on_chld(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	chld_count++;
	chld_code = si->si_code;
	chld_pid = si->si_pid;
	chld_status = si->si_status;
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_chld;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	EXPECT(sigaction(SIGCHLD, &sa, NULL), 0);
	sigset_t chld, empty;
	sigemptyset(&chld);
	sigemptyset(&empty);
	sigaddset(&chld, SIGCHLD);
	EXPECT(sigprocmask(SIG_BLOCK, &chld, NULL), 0);

	pid_t c = fork();
	if (c == 0)
		_exit(7);
	/* Wait for SIGCHLD to arrive, then look without reaping. */
	EXPECT_ERR(sigsuspend(&empty), EINTR);
	EXPECT(chld_count, 1);
	EXPECT(chld_code, CLD_EXITED);
	EXPECT_TRUE(chld_pid == c);
	EXPECT(chld_status, 7);

	siginfo_t si;
	memset(&si, 0, sizeof si);
	EXPECT(waitid(P_PID, c, &si, WEXITED | WNOWAIT), 0);
	EXPECT(si.si_signo, SIGCHLD);
	EXPECT(si.si_code, CLD_EXITED);
	EXPECT(si.si_status, 7);
	EXPECT_TRUE(si.si_pid == c);
	EXPECT_TRUE(si.si_uid == getuid());
	/* Still there: reap it for real. */
	memset(&si, 0, sizeof si);
	EXPECT(waitid(P_ALL, 0, &si, WEXITED), 0);
	EXPECT_TRUE(si.si_pid == c);
	EXPECT(si.si_status, 7);
	EXPECT_ERR(waitid(P_PID, c, &si, WEXITED), ECHILD);

	/* Death by signal: CLD_KILLED with the signal number. */
	c = fork();
	if (c == 0) {
		pause();
		_exit(0);
	}
	EXPECT(kill(c, SIGTERM), 0);
	EXPECT_ERR(sigsuspend(&empty), EINTR);
	EXPECT(chld_code, CLD_KILLED);
	EXPECT(chld_status, SIGTERM);
	memset(&si, 0, sizeof si);
	EXPECT(waitid(P_PID, c, &si, WEXITED), 0);
	EXPECT(si.si_code, CLD_KILLED);
	EXPECT(si.si_status, SIGTERM);

	/* A core-dumping signal: CLD_DUMPED or CLD_KILLED depending on the core
	 * limit; with RLIMIT_CORE 0 it is CLD_KILLED. */
	c = fork();
	if (c == 0) {
		struct rlimit { unsigned long a, b; } z = {0, 0};
		syscall(SYS_setrlimit, 4 /* RLIMIT_CORE */, &z);
		abort();
	}
	EXPECT_ERR(sigsuspend(&empty), EINTR);
	memset(&si, 0, sizeof si);
	EXPECT(waitid(P_PID, c, &si, WEXITED), 0);
	EXPECT(si.si_code, CLD_KILLED);
	EXPECT(si.si_status, SIGABRT);

	/* waitid WNOHANG with a running child: 0 and si_pid 0. */
	c = fork();
	if (c == 0) {
		usleep(200000);
		_exit(0);
	}
	memset(&si, 0, sizeof si);
	si.si_pid = 123;
	EXPECT(waitid(P_PID, c, &si, WEXITED | WNOHANG), 0);
	EXPECT(si.si_pid, 0);
	EXPECT(waitid(P_PID, c, &si, WEXITED), 0);
	EXPECT_TRUE(si.si_pid == c);
	/* P_PGID with our group. */
	c = fork();
	if (c == 0)
		_exit(3);
	memset(&si, 0, sizeof si);
	EXPECT(waitid(P_PGID, getpgrp(), &si, WEXITED), 0);
	EXPECT(si.si_status, 3);
	/* Errors. */
	EXPECT_ERR(waitid(P_ALL, 0, &si, WEXITED), ECHILD);
	EXPECT_ERR(waitid(P_ALL, 0, &si, 0), EINVAL);
	EXPECT_ERR(waitid(7, 0, &si, WEXITED), EINVAL);
	/* SIGCHLD ignored: children are reaped automatically, wait gives
	 * ECHILD once the child is gone. */
	signal(SIGCHLD, SIG_IGN);
	EXPECT(sigprocmask(SIG_UNBLOCK, &chld, NULL), 0);
	c = fork();
	if (c == 0)
		_exit(0);
	EXPECT_ERR(waitpid(c, NULL, 0), ECHILD);
	return t_done();
}
