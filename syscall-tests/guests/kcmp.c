/* kcmp(2) between this process, one of its threads and a child, each
 * KCMP_* type, the ptrace access check and the errnos; pidfd_getfd(2),
 * whose descriptor is the child's open file, close-on-exec. */
#include "t.h"
#include <pthread.h>
#include <sys/epoll.h>
#include <linux/kcmp.h>

static long kcmp(pid_t a, pid_t b, int type, unsigned long i1, unsigned long i2)
{
	return syscall(SYS_kcmp, a, b, type, i1, i2);
}

static const char *same(long r)
{
	return r == 0 ? "same" : r == 1 || r == 2 ? "different" : errname(errno);
}

static volatile pid_t thread_tid;
static int hold[2];

static void *thread_main(void *arg)
{
	(void)arg;
	thread_tid = gettid();
	char c;
	read(hold[0], &c, 1);
	return NULL;
}

int main(void)
{
	pid_t me = getpid();
	int fd = memfd_create("a", 0), other = memfd_create("b", 0), copy = dup(fd);
	for (int t = KCMP_VM; t <= KCMP_SYSVSEM; t++)
		SHOW("self, type %d: %s", t, same(kcmp(me, me, t, 0, 0)));
	SHOW("fd and its dup: %s", same(kcmp(me, me, KCMP_FILE, fd, copy)));
	SHOW("two memfds: %s", same(kcmp(me, me, KCMP_FILE, fd, other)));
	long ab = kcmp(me, me, KCMP_FILE, fd, other), ba = kcmp(me, me, KCMP_FILE, other, fd);
	EXPECT_TRUE(ab + ba == 3);
	EXPECT_ERR(kcmp(me, me, KCMP_FILE, fd, 99), EBADF);
	EXPECT_ERR(kcmp(me, me, KCMP_TYPES, 0, 0), EINVAL);
	EXPECT_ERR(kcmp(me, 999999, KCMP_VM, 0, 0), ESRCH);
	EXPECT_ERR(kcmp(999999, me, KCMP_TYPES, 0, 0), ESRCH);

	/* An epoll instance's target file. */
	int ep = epoll_create1(0), pp[2];
	EXPECT(pipe(pp), 0);
	struct epoll_event ev = {.events = EPOLLIN};
	EXPECT(epoll_ctl(ep, EPOLL_CTL_ADD, pp[0], &ev), 0);
	struct kcmp_epoll_slot slot = {.efd = ep, .tfd = pp[0], .toff = 0};
	int pdup = dup(pp[0]);
	SHOW("epoll target, its file: %s", same(kcmp(me, me, KCMP_EPOLL_TFD, pdup, (long)&slot)));
	SHOW("epoll target, another: %s", same(kcmp(me, me, KCMP_EPOLL_TFD, pp[1], (long)&slot)));
	slot.toff = 1;
	EXPECT_ERR(kcmp(me, me, KCMP_EPOLL_TFD, fd, (long)&slot), ENOENT);
	slot.toff = 0;
	slot.tfd = other;
	EXPECT_ERR(kcmp(me, me, KCMP_EPOLL_TFD, fd, (long)&slot), ENOENT);
	slot.efd = fd;
	EXPECT_ERR(kcmp(me, me, KCMP_EPOLL_TFD, fd, (long)&slot), EINVAL);
	slot.efd = 99;
	EXPECT_ERR(kcmp(me, me, KCMP_EPOLL_TFD, fd, (long)&slot), EBADF);
	EXPECT_ERR(kcmp(me, me, KCMP_EPOLL_TFD, 99, (long)&slot), EBADF);
	EXPECT_ERR(kcmp(me, me, KCMP_EPOLL_TFD, fd, (long)BADPTR), EFAULT);

	/* A thread shares everything but its I/O context. */
	pthread_t th;
	EXPECT(pipe(hold), 0);
	EXPECT_RC(pthread_create(&th, NULL, thread_main, NULL), 0);
	while (!thread_tid)
		usleep(1000);
	for (int t = KCMP_VM; t <= KCMP_SIGHAND; t++)
		SHOW("thread, type %d: %s", t, same(kcmp(me, thread_tid, t, 0, 0)));
	SHOW("thread, fd: %s", same(kcmp(me, thread_tid, KCMP_FILE, fd, copy)));
	write(hold[1], "x", 1);
	pthread_join(th, NULL);

	/* A child shares its inherited open files, nothing else. */
	int ready[2], go[2];
	EXPECT(pipe(ready), 0);
	EXPECT(pipe(go), 0);
	pid_t child = fork();
	if (child == 0) {
		int mine = memfd_create("child", 0);
		write(ready[1], &mine, sizeof mine);
		char c;
		read(go[0], &c, 1);
		/* Without root, another user's process is out of reach. */
		if (setresuid(1000, 1000, 1000))
			_exit(3);
		int ok = kcmp(getpid(), getppid(), KCMP_VM, 0, 0) == -1 && errno == EPERM;
		ok &= kcmp(getpid(), getpid(), KCMP_VM, 0, 0) == 0;
		int pfd = syscall(SYS_pidfd_open, getppid(), 0);
		ok &= syscall(SYS_pidfd_getfd, pfd, 0, 0) == -1 && errno == EPERM;
		_exit(ok ? 0 : 4);
	}
	int theirs = -1;
	EXPECT(read(ready[0], &theirs, sizeof theirs), sizeof theirs);
	for (int t = KCMP_VM; t <= KCMP_SIGHAND; t++)
		SHOW("child, type %d: %s", t, same(kcmp(me, child, t, 0, 0)));
	SHOW("child, undo list (ours made by CLONE_SYSVSEM): %s", same(kcmp(me, child, KCMP_SYSVSEM, 0, 0)));
	SHOW("child, inherited fd: %s", same(kcmp(me, child, KCMP_FILE, fd, fd)));
	SHOW("child, its own memfd: %s", same(kcmp(me, child, KCMP_FILE, fd, theirs)));

	int pidfd = syscall(SYS_pidfd_open, child, 0);
	EXPECT_TRUE(pidfd >= 0);
	int got = syscall(SYS_pidfd_getfd, pidfd, theirs, 0);
	EXPECT_TRUE(got >= 0);
	EXPECT(fcntl(got, F_GETFD), FD_CLOEXEC);
	SHOW("pidfd_getfd is their file: %s", same(kcmp(me, child, KCMP_FILE, got, theirs)));
	EXPECT_ERR(syscall(SYS_pidfd_getfd, pidfd, theirs, 1), EINVAL);
	EXPECT_ERR(syscall(SYS_pidfd_getfd, pidfd, 99, 0), EBADF);
	EXPECT_ERR(syscall(SYS_pidfd_getfd, fd, 0, 0), EBADF);
	EXPECT_ERR(syscall(SYS_pidfd_getfd, 99, 0, 0), EBADF);
	write(go[1], "x", 1);
	int st;
	EXPECT_TRUE(waitpid(child, &st, 0) == child);
	EXPECT(WEXITSTATUS(st), 0);
	EXPECT_ERR(syscall(SYS_pidfd_getfd, pidfd, 0, 0), ESRCH);
	EXPECT_ERR(kcmp(me, child, KCMP_VM, 0, 0), ESRCH);
	return t_done();
}
