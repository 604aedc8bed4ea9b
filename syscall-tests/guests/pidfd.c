/* Process descriptors: pidfd_open (flags, bad and reaped pids, another
 * thread), pidfd_send_signal (through a pidfd and through a /proc/[pid]
 * directory, with and without siginfo, to a zombie and after the reap;
 * kill(2) to a zombie too),
 * poll readiness on exit, waitid(P_PIDFD) blocking and non-blocking, and
 * clone3's CLONE_PIDFD. */
#include "t.h"
#include <poll.h>
#include <pthread.h>
#include <linux/sched.h>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#define PIDFD_NONBLOCK O_NONBLOCK

static int pidfd_open(pid_t pid, unsigned flags)
{
	return syscall(SYS_pidfd_open, pid, flags);
}

static int pidfd_send_signal(int fd, int sig, siginfo_t *info, unsigned flags)
{
	return syscall(SYS_pidfd_send_signal, fd, sig, info, flags);
}

static volatile int usr1_count, usr1_code, usr1_value;
static void on_usr1(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	usr1_count++;
	usr1_code = si->si_code;
	usr1_value = si->si_value.sival_int;
}

static volatile pid_t thread_tid;
static volatile int thread_go;
static void *thread_main(void *arg)
{
	(void)arg;
	thread_tid = gettid();
	while (!thread_go)
		usleep(1000);
	return NULL;
}

/* A child that waits to be killed. */
static pid_t sleeper(void)
{
	pid_t c = fork();
	if (c == 0) {
		for (;;)
			pause();
	}
	return c;
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_usr1;
	sa.sa_flags = SA_SIGINFO;
	EXPECT(sigaction(SIGUSR1, &sa, NULL), 0);

	/* Arguments. */
	EXPECT_ERR(pidfd_open(getpid(), 1), EINVAL);
	EXPECT_ERR(pidfd_open(0, 0), EINVAL);
	EXPECT_ERR(pidfd_open(-1, 0), EINVAL);

	/* Another thread is not a process. */
	pthread_t th;
	EXPECT(pthread_create(&th, NULL, thread_main, NULL), 0);
	while (!thread_tid)
		usleep(1000);
	/* Linux 6.9 and later: ENOENT (EINVAL before). */
	EXPECT_ERR(pidfd_open(thread_tid, 0), ENOENT);
	thread_go = 1;
	EXPECT(pthread_join(th, NULL), 0);

	/* A live child: not readable, signal 0 checks, a signal kills it. */
	pid_t c = sleeper();
	int fd = EXPECT(pidfd_open(c, 0), 3);
	EXPECT(fcntl(fd, F_GETFD), FD_CLOEXEC);
	EXPECT(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDWR);
	char buf[8];
	EXPECT_ERR(read(fd, buf, sizeof buf), EINVAL);
	EXPECT_ERR(lseek(fd, 0, SEEK_SET), ESPIPE);
	struct pollfd pf = {fd, POLLIN, 0};
	EXPECT(poll(&pf, 1, 0), 0);
	EXPECT_ERR(pidfd_send_signal(fd, SIGTERM, NULL, 8), EINVAL);
	EXPECT_ERR(pidfd_send_signal(fd, SIGTERM, NULL, 3), EINVAL);
	EXPECT_ERR(pidfd_send_signal(fd, 65, NULL, 0), EINVAL);
	EXPECT(pidfd_send_signal(fd, 0, NULL, 0), 0);
	siginfo_t si;
	memset(&si, 0, sizeof si);
	si.si_signo = SIGUSR2;
	si.si_code = SI_QUEUE;
	EXPECT_ERR(pidfd_send_signal(fd, SIGTERM, &si, 0), EINVAL);
	/* Another process may not forge a kernel code. */
	si.si_signo = SIGTERM;
	si.si_code = SI_KERNEL;
	EXPECT_ERR(pidfd_send_signal(fd, SIGTERM, &si, 0), EPERM);
	EXPECT(pidfd_send_signal(fd, SIGTERM, NULL, 0), 0);
	EXPECT(poll(&pf, 1, 5000), 1);
	EXPECT(pf.revents, POLLIN);
	/* A zombie still takes signals (they go nowhere), as kill(2) does. */
	EXPECT(pidfd_send_signal(fd, SIGTERM, NULL, 0), 0);
	EXPECT(kill(c, 0), 0);
	/* fdinfo names the process. */
	char path[64], want[32], info[512];
	snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
	int ifd = EXPECT(open(path, O_RDONLY), 4);
	ssize_t n = read(ifd, info, sizeof info - 1);
	info[n > 0 ? n : 0] = 0;
	close(ifd);
	snprintf(want, sizeof want, "\nPid:\t%d\n", c);
	EXPECT_TRUE(strstr(info, want) != NULL);
	memset(&si, 0, sizeof si);
	EXPECT(waitid(P_PIDFD, fd, &si, WEXITED), 0);
	EXPECT_TRUE(si.si_pid == c);
	EXPECT(si.si_code, CLD_KILLED);
	EXPECT(si.si_status, SIGTERM);
	/* Reaped: the descriptor stays, the process is gone. */
	EXPECT(poll(&pf, 1, 0), 1);
	EXPECT_ERR(pidfd_send_signal(fd, SIGTERM, NULL, 0), ESRCH);
	EXPECT_ERR(waitid(P_PIDFD, fd, &si, WEXITED), ECHILD);
	EXPECT_ERR(pidfd_open(c, 0), ESRCH);
	EXPECT(close(fd), 0);

	/* Not a pidfd. */
	int devnull = EXPECT(open("/dev/null", O_RDONLY), 3);
	EXPECT_ERR(pidfd_send_signal(devnull, SIGTERM, NULL, 0), EBADF);
	EXPECT_ERR(waitid(P_PIDFD, devnull, &si, WEXITED), EBADF);
	EXPECT(close(devnull), 0);
	EXPECT_ERR(pidfd_send_signal(99, SIGTERM, NULL, 0), EBADF);

	/* Non-blocking: waitid says EAGAIN while the child runs. */
	c = sleeper();
	fd = EXPECT(pidfd_open(c, PIDFD_NONBLOCK), 3);
	EXPECT(fcntl(fd, F_GETFL) & O_NONBLOCK, O_NONBLOCK);
	EXPECT_ERR(waitid(P_PIDFD, fd, &si, WEXITED), EAGAIN);
	memset(&si, 0, sizeof si);
	EXPECT(waitid(P_PIDFD, fd, &si, WEXITED | WNOHANG), 0);
	EXPECT(si.si_pid, 0);
	EXPECT(kill(c, SIGKILL), 0);
	pf.fd = fd;
	EXPECT(poll(&pf, 1, 5000), 1);
	EXPECT(waitid(P_PIDFD, fd, &si, WEXITED), 0);
	EXPECT(si.si_code, CLD_KILLED);
	EXPECT(si.si_status, SIGKILL);
	EXPECT(close(fd), 0);

	/* A zombie can be opened. */
	c = fork();
	if (c == 0)
		_exit(7);
	EXPECT(waitid(P_PID, c, &si, WEXITED | WNOWAIT), 0);
	fd = EXPECT(pidfd_open(c, 0), 3);
	pf.fd = fd;
	EXPECT(poll(&pf, 1, 0), 1);
	EXPECT(waitid(P_PIDFD, fd, &si, WEXITED), 0);
	EXPECT(si.si_code, CLD_EXITED);
	EXPECT(si.si_status, 7);
	EXPECT(close(fd), 0);

	/* Ourselves through a pidfd, with queued data. */
	fd = EXPECT(pidfd_open(getpid(), 0), 3);
	memset(&si, 0, sizeof si);
	si.si_signo = SIGUSR1;
	si.si_code = SI_QUEUE;
	si.si_value.sival_int = 42;
	EXPECT(pidfd_send_signal(fd, SIGUSR1, &si, 0), 0);
	EXPECT(usr1_count, 1);
	EXPECT(usr1_code, SI_QUEUE);
	EXPECT(usr1_value, 42);
	/* PIDFD_SIGNAL_THREAD (Linux 6.9): to the process's first thread,
	 * as tgkill sends. */
	EXPECT(pidfd_send_signal(fd, SIGUSR1, NULL, 1), 0);
	EXPECT(usr1_count, 2);
	EXPECT(usr1_code, SI_TKILL);
	EXPECT(close(fd), 0);

	/* Ourselves through /proc/[pid]; a thread's directory does not do. */
	fd = EXPECT(open("/proc/self", O_RDONLY | O_DIRECTORY), 3);
	EXPECT(pidfd_send_signal(fd, SIGUSR1, NULL, 0), 0);
	EXPECT(usr1_count, 3);
	EXPECT(usr1_code, SI_USER);
	EXPECT(close(fd), 0);
	snprintf(path, sizeof path, "/proc/self/task/%d", getpid());
	fd = EXPECT(open(path, O_RDONLY | O_DIRECTORY), 3);
	EXPECT_ERR(pidfd_send_signal(fd, SIGUSR1, NULL, 0), EBADF);
	EXPECT(close(fd), 0);

	/* clone3 hands back a pidfd. */
	int cfd = -1;
	struct clone_args ca;
	memset(&ca, 0, sizeof ca);
	ca.flags = CLONE_PIDFD;
	ca.pidfd = (uint64_t)(uintptr_t)&cfd;
	ca.exit_signal = SIGCHLD;
	c = syscall(SYS_clone3, &ca, sizeof ca);
	if (c == 0)
		_exit(3);
	EXPECT_TRUE(c > 0);
	EXPECT(cfd, 3);
	EXPECT(fcntl(cfd, F_GETFD), FD_CLOEXEC);
	memset(&si, 0, sizeof si);
	EXPECT(waitid(P_PIDFD, cfd, &si, WEXITED), 0);
	EXPECT_TRUE(si.si_pid == c);
	EXPECT(si.si_code, CLD_EXITED);
	EXPECT(si.si_status, 3);
	EXPECT(close(cfd), 0);

	/* clone(2) returns the pidfd through parent_tid, so not both. */
	EXPECT_ERR(syscall(SYS_clone, CLONE_PIDFD | CLONE_PARENT_SETTID | SIGCHLD, 0, &cfd, 0, 0),
		   EINVAL);
	return t_done();
}
