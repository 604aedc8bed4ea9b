/* signalfd: blocked signals are read as signalfd_siginfo records (signo,
 * code, pid, value), poll readiness, non-blocking EAGAIN, updating the mask,
 * and a signal from a child. */
#include "t.h"
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>

int main(void)
{
	sigset_t m;
	sigemptyset(&m);
	sigaddset(&m, SIGUSR1);
	sigaddset(&m, SIGRTMIN);
	EXPECT(sigprocmask(SIG_BLOCK, &m, NULL), 0);
	int fd = EXPECT(signalfd(-1, &m, SFD_NONBLOCK | SFD_CLOEXEC), 3);
	struct signalfd_siginfo si[4];
	EXPECT_ERR(read(fd, si, sizeof si), EAGAIN);
	struct pollfd pf = {fd, POLLIN, 0};
	EXPECT(poll(&pf, 1, 0), 0);

	EXPECT(raise(SIGUSR1), 0);
	EXPECT(poll(&pf, 1, 0), 1);
	EXPECT(read(fd, si, sizeof si), sizeof si[0]);
	EXPECT(si[0].ssi_signo, SIGUSR1);
	EXPECT(si[0].ssi_code, SI_TKILL);
	EXPECT_TRUE(si[0].ssi_pid == (uint32_t)getpid());
	EXPECT_ERR(read(fd, si, sizeof si), EAGAIN);
	EXPECT_ERR(read(fd, si, sizeof si[0] - 1), EINVAL);

	/* Two queued real-time signals with values, read in one go. */
	union sigval v = {.sival_int = 11};
	sigqueue(getpid(), SIGRTMIN, v);
	v.sival_int = 12;
	sigqueue(getpid(), SIGRTMIN, v);
	EXPECT(read(fd, si, sizeof si), 2 * sizeof si[0]);
	EXPECT(si[0].ssi_int, 11);
	EXPECT(si[1].ssi_int, 12);
	EXPECT(si[1].ssi_code, SI_QUEUE);

	/* Not in the fd's mask: stays pending, not readable. */
	sigset_t u2;
	sigemptyset(&u2);
	sigaddset(&u2, SIGUSR2);
	sigprocmask(SIG_BLOCK, &u2, NULL);
	raise(SIGUSR2);
	EXPECT_ERR(read(fd, si, sizeof si), EAGAIN);
	/* Update the mask of the existing fd. */
	EXPECT(signalfd(fd, &u2, 0), 3);
	EXPECT(read(fd, si, sizeof si), sizeof si[0]);
	EXPECT(si[0].ssi_signo, SIGUSR2);

	/* Blocking read woken by a child's kill. */
	int bfd = EXPECT(signalfd(-1, &m, 0), 4);
	pid_t c = fork();
	if (c == 0) {
		usleep(100000);
		kill(getppid(), SIGUSR1);
		_exit(0);
	}
	EXPECT(read(bfd, si, sizeof si), sizeof si[0]);
	EXPECT(si[0].ssi_signo, SIGUSR1);
	EXPECT(si[0].ssi_code, SI_USER);
	EXPECT_TRUE(si[0].ssi_pid == (uint32_t)c);
	waitpid(c, NULL, 0);
	/* SIGCHLD through signalfd with the exit status. */
	sigset_t ch;
	sigemptyset(&ch);
	sigaddset(&ch, SIGCHLD);
	sigprocmask(SIG_BLOCK, &ch, NULL);
	int cfd = EXPECT(signalfd(-1, &ch, 0), 5);
	c = fork();
	if (c == 0)
		_exit(33);
	EXPECT(read(cfd, si, sizeof si[0]), sizeof si[0]);
	EXPECT(si[0].ssi_signo, SIGCHLD);
	EXPECT(si[0].ssi_code, CLD_EXITED);
	EXPECT(si[0].ssi_status, 33);
	EXPECT_TRUE(si[0].ssi_pid == (uint32_t)c);
	waitpid(c, NULL, 0);
	/* Errors. */
	EXPECT_ERR(signalfd(-1, &m, 0x1), EINVAL);
	EXPECT_ERR(signalfd(0, &m, 0), EINVAL);
	EXPECT_ERR(signalfd(77, &m, 0), EBADF);
	return t_done();
}
