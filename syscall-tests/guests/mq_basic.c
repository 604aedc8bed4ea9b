/* POSIX message queues: mq_open's names, flags, attributes, limits and
 * errors; priorities, blocking with absolute timeouts, EAGAIN, ETIMEDOUT,
 * EMSGSIZE, EBADF, EINTR; mq_notify with SIGEV_SIGNAL and SIGEV_NONE;
 * mq_getsetattr; poll, select and epoll; close-on-exec and fork; a queue
 * outliving its name; and the mqueue file system (the sandbox's
 * /dev/mqueue; natively one mounted in a private mount namespace). Queue
 * names carry the pid, since natively they are host-wide; they are never
 * printed. */
/* link: -lrt */
#include "t.h"
#include <mqueue.h>
#include <dirent.h>
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/statfs.h>
#include <sys/time.h>
#include <time.h>

static char name_a[64], name_b[64], name_c[64], name_d[64];

static struct timespec in_ms(long ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* The line reading a queue gives, with its NOTIFY_PID reduced to whether
 * it is `pid`. */
static void show_status(int fd, pid_t pid)
{
	char buf[128] = {0};
	long n = pread(fd, buf, sizeof buf - 1, 0);
	unsigned long qsize;
	int notify, signo, npid;
	if (n <= 0 || sscanf(buf, "QSIZE:%lu NOTIFY:%d SIGNO:%d NOTIFY_PID:%d", &qsize, &notify,
			    &signo, &npid) != 4) {
		SHOW("status: unreadable (%ld)", n);
		t_failures++;
		return;
	}
	SHOW("status: len=%ld qsize=%lu notify=%d signo=%d pid_is_ours=%s", n, qsize, notify,
	     signo, npid == 0 ? "none" : npid == pid ? "yes" : "no");
}

static void names_and_limits(void)
{
	char longname[300];
	memset(longname, 'x', sizeof longname - 1);
	longname[0] = '/';
	longname[sizeof longname - 1] = 0;
	struct mq_attr attr = {.mq_maxmsg = 4, .mq_msgsize = 16};
	EXPECT_ERR(mq_open("noslash", O_RDWR | O_CREAT, 0600, &attr), EINVAL);
	EXPECT_ERR(mq_open("/a/b", O_RDWR | O_CREAT, 0600, &attr), EACCES);
	EXPECT_ERR(mq_open("/", O_RDWR | O_CREAT, 0600, &attr), ENOENT);
	EXPECT_ERR(mq_open(longname, O_RDWR | O_CREAT, 0600, &attr), ENAMETOOLONG);
	EXPECT_ERR(mq_open(name_a, O_RDWR), ENOENT);
	EXPECT_ERR(mq_unlink(name_a), ENOENT);
	struct mq_attr bad = {.mq_maxmsg = 0, .mq_msgsize = 16};
	EXPECT_ERR(mq_open(name_a, O_RDWR | O_CREAT, 0600, &bad), EINVAL);
	bad = (struct mq_attr){.mq_maxmsg = 4, .mq_msgsize = -1};
	EXPECT_ERR(mq_open(name_a, O_RDWR | O_CREAT, 0600, &bad), EINVAL);
	bad = (struct mq_attr){.mq_maxmsg = 65537, .mq_msgsize = 16};
	EXPECT_ERR(mq_open(name_a, O_RDWR | O_CREAT, 0600, &bad), EINVAL);
	bad = (struct mq_attr){.mq_maxmsg = 1, .mq_msgsize = (16 << 20) + 1};
	EXPECT_ERR(mq_open(name_a, O_RDWR | O_CREAT, 0600, &bad), EINVAL);
	/* (whether root may pass the soft limits of 10 messages and 8192
	 * bytes depends on CAP_SYS_RESOURCE, which a host may withhold) */
	struct mq_attr got;

	/* Someone else: the soft limits, permission bits, the per-user byte
	 * limit (RLIMIT_MSGQUEUE: message bytes plus Linux's bookkeeping). */
	int q = EXPECT_OK(mq_open(name_a, O_RDWR | O_CREAT | O_EXCL, 0600, &attr));
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		struct rlimit rl = {20000, 20000};
		if (setrlimit(RLIMIT_MSGQUEUE, &rl) != 0 || setgid(54321) != 0 || setuid(54321) != 0)
			_exit(3);
		int f = 0;
		if (mq_open(name_a, O_RDONLY) != -1 || errno != EACCES)
			f |= 1;
		struct mq_attr a = {.mq_maxmsg = 11, .mq_msgsize = 16};
		if (mq_open(name_b, O_RDWR | O_CREAT, 0600, &a) != -1 || errno != EINVAL)
			f |= 2;
		a = (struct mq_attr){.mq_maxmsg = 10, .mq_msgsize = 1000};
		if (mq_open(name_b, O_RDWR | O_CREAT, 0600, &a) < 0)
			f |= 4;
		if (mq_open(name_c, O_RDWR | O_CREAT, 0600, &a) != -1 || errno != EMFILE)
			f |= 8;
		/* not the owner */
		if (mq_unlink(name_a) != -1 || errno != EACCES)
			f |= 16;
		if (mq_unlink(name_b) != 0)
			f |= 32;
		_exit(f);
	}
	int st;
	waitpid(pid, &st, 0);
	SHOW("other user: status=%d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		t_failures++;

	EXPECT_ERR(mq_open(name_a, O_RDWR | O_CREAT | O_EXCL, 0600, &attr), EEXIST);
	EXPECT_ERR(mq_open(name_a, O_RDWR | O_WRONLY), EINVAL);
	/* attributes of an existing queue are ignored */
	struct mq_attr other = {.mq_maxmsg = 2, .mq_msgsize = 2};
	int q2 = EXPECT_OK(mq_open(name_a, O_RDWR | O_CREAT, 0600, &other));
	EXPECT(mq_getattr(q2, &got), 0);
	SHOW("existing: maxmsg=%ld msgsize=%ld curmsgs=%ld", got.mq_maxmsg, got.mq_msgsize,
	     got.mq_curmsgs);
	/* always close-on-exec */
	EXPECT(fcntl(q2, F_GETFD), FD_CLOEXEC);
	EXPECT(close(q2), 0);
	EXPECT(close(q), 0);

	/* the descriptor limit */
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		struct rlimit rl = {3, 3};
		setrlimit(RLIMIT_NOFILE, &rl);
		_exit(mq_open(name_a, O_RDWR) == -1 && errno == EMFILE ? 0 : 1);
	}
	waitpid(pid, &st, 0);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void messages(void)
{
	int q = EXPECT_OK(mq_open(name_a, O_RDWR));
	char buf[64];
	unsigned prio;
	EXPECT(mq_send(q, "low", 3, 1), 0);
	EXPECT(mq_send(q, "high", 4, 10), 0);
	EXPECT(mq_send(q, "mid", 3, 5), 0);
	EXPECT(mq_send(q, "low2", 4, 1), 0);
	show_status(q, getpid());
	for (int i = 0; i < 4; i++) {
		memset(buf, 0, sizeof buf);
		long n = mq_receive(q, buf, sizeof buf, &prio);
		SHOW("received %ld '%s' prio %u", n, buf, prio);
	}
	EXPECT_ERR(mq_send(q, "seventeen bytes..", 17, 0), EMSGSIZE);
	EXPECT_ERR(mq_send(q, "x", 1, 32768), EINVAL);
	EXPECT_ERR(mq_receive(q, buf, 15, &prio), EMSGSIZE);
	EXPECT(mq_send(q, "", 0, 0), 0);
	EXPECT(mq_receive(q, buf, 16, NULL), 0);

	/* blocking with absolute CLOCK_REALTIME timeouts */
	struct timespec ts = in_ms(50);
	EXPECT_ERR(mq_timedreceive(q, buf, sizeof buf, &prio, &ts), ETIMEDOUT);
	ts = (struct timespec){0, 0};
	EXPECT_ERR(mq_timedreceive(q, buf, sizeof buf, &prio, &ts), ETIMEDOUT);
	ts = (struct timespec){0, 2000000000L};
	EXPECT_ERR(mq_timedreceive(q, buf, sizeof buf, &prio, &ts), EINVAL);
	for (int i = 0; i < 4; i++)
		mq_send(q, "m", 1, 0);
	ts = in_ms(50);
	EXPECT_ERR(mq_timedsend(q, "m", 1, 0, &ts), ETIMEDOUT);
	/* a past timeout is no matter while there is room */
	EXPECT(mq_receive(q, buf, sizeof buf, NULL), 1);
	ts = (struct timespec){0, 0};
	EXPECT(mq_timedsend(q, "n", 1, 0, &ts), 0);

	/* O_NONBLOCK through mq_setattr */
	struct mq_attr na = {.mq_flags = O_NONBLOCK}, old;
	EXPECT(mq_setattr(q, &na, &old), 0);
	SHOW("old flags nonblock=%d curmsgs=%ld", !!(old.mq_flags & O_NONBLOCK), old.mq_curmsgs);
	EXPECT_ERR(mq_send(q, "m", 1, 0), EAGAIN);
	EXPECT(mq_getattr(q, &old), 0);
	SHOW("flags nonblock=%d", !!(old.mq_flags & O_NONBLOCK));
	na.mq_flags = O_NONBLOCK | O_APPEND;
	EXPECT_ERR(mq_setattr(q, &na, &old), EINVAL);
	while (mq_receive(q, buf, sizeof buf, NULL) >= 0)
		;
	EXPECT_TRUE(errno == EAGAIN);
	na.mq_flags = 0;
	EXPECT(mq_setattr(q, &na, NULL), 0);

	/* access modes */
	int ro = EXPECT_OK(mq_open(name_a, O_RDONLY | O_NONBLOCK));
	int wo = EXPECT_OK(mq_open(name_a, O_WRONLY | O_NONBLOCK));
	EXPECT_ERR(mq_send(ro, "x", 1, 0), EBADF);
	EXPECT_ERR(mq_receive(wo, buf, sizeof buf, NULL), EBADF);
	EXPECT(mq_send(wo, "x", 1, 0), 0);
	EXPECT(mq_receive(ro, buf, sizeof buf, NULL), 1);
	EXPECT_ERR(mq_receive(ro, buf, sizeof buf, NULL), EAGAIN);
	int p[2];
	pipe(p);
	EXPECT_ERR(mq_send(p[1], "x", 1, 0), EBADF);
	EXPECT_ERR(mq_getattr(p[0], &old), EBADF);
	close(p[0]);
	close(p[1]);
	/* the descriptor as a file: reads give the status line, writes fail */
	EXPECT_ERR(write(q, "x", 1), EINVAL);
	EXPECT_ERR(write(ro, "x", 1), EBADF);
	EXPECT_ERR(read(wo, buf, sizeof buf), EBADF);
	EXPECT(read(ro, buf, sizeof buf), 60);
	EXPECT(read(ro, buf, sizeof buf), 0);
	struct stat sb;
	EXPECT(fstat(q, &sb), 0);
	SHOW("fstat: reg=%d mode=%o size=%ld", S_ISREG(sb.st_mode), sb.st_mode & 07777,
	     (long)sb.st_size);
	close(ro);
	close(wo);

	/* a blocked receiver woken by another process's send (fork shares
	 * the descriptor) */
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		usleep(100000);
		_exit(mq_send(q, "from child", 10, 3) == 0 ? 0 : 1);
	}
	memset(buf, 0, sizeof buf);
	long n = mq_receive(q, buf, sizeof buf, &prio);
	SHOW("blocked receive: %ld '%s' prio %u", n, buf, prio);
	int st;
	waitpid(pid, &st, 0);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	/* a blocked sender woken by a receive */
	for (int i = 0; i < 4; i++)
		mq_send(q, "f", 1, 0);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		usleep(100000);
		char b[64];
		_exit(mq_receive(q, b, sizeof b, NULL) == 1 ? 0 : 1);
	}
	ts = in_ms(5000);
	EXPECT(mq_timedsend(q, "g", 1, 0, &ts), 0);
	waitpid(pid, &st, 0);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	while (mq_timedreceive(q, buf, sizeof buf, NULL, &(struct timespec){0, 0}) >= 0)
		;

	/* a signal interrupts a blocked receive: EINTR without SA_RESTART */
	struct sigaction sa = {.sa_handler = on_alarm};
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = {.it_value = {0, 50000}};
	setitimer(ITIMER_REAL, &it, NULL);
	EXPECT_ERR(mq_receive(q, buf, sizeof buf, NULL), EINTR);
	/* and a blocked send, timeout or not */
	for (int i = 0; i < 4; i++)
		mq_send(q, "f", 1, 0);
	setitimer(ITIMER_REAL, &it, NULL);
	ts = in_ms(5000);
	EXPECT_ERR(mq_timedsend(q, "h", 1, 0, &ts), EINTR);
	while (mq_timedreceive(q, buf, sizeof buf, NULL, &(struct timespec){0, 0}) >= 0)
		;
	/* with SA_RESTART the receive goes on after the handler */
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		usleep(200000);
		_exit(mq_send(q, "late", 4, 0) == 0 ? 0 : 1);
	}
	setitimer(ITIMER_REAL, &it, NULL);
	EXPECT(mq_receive(q, buf, sizeof buf, NULL), 4);
	waitpid(pid, &st, 0);
	EXPECT(close(q), 0);
}

static void notification(void)
{
	int q = EXPECT_OK(mq_open(name_a, O_RDWR | O_NONBLOCK));
	char buf[64];
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR1};
	ev.sigev_value.sival_int = 42;
	EXPECT(mq_notify(q, &ev), 0);
	EXPECT_ERR(mq_notify(q, &ev), EBUSY);
	show_status(q, getpid());
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		/* someone else's registration is busy too, and theirs to drop */
		struct sigevent e2 = {.sigev_notify = SIGEV_NONE};
		int f = mq_notify(q, &e2) == -1 && errno == EBUSY ? 0 : 1;
		if (mq_notify(q, NULL) != 0)
			f |= 2;
		if (mq_send(q, "wake", 4, 0) != 0)
			f |= 4;
		_exit(f);
	}
	siginfo_t si;
	struct timespec ts = {5, 0};
	int sig = sigtimedwait(&set, &si, &ts);
	SHOW("notified: sig=%d code_mesgq=%d value=%d pid_is_sender=%d", sig,
	     si.si_code == SI_MESGQ, si.si_value.sival_int, si.si_pid == pid);
	int st;
	waitpid(pid, &st, 0);
	SHOW("child status %d", WEXITSTATUS(st));
	/* the registration was used up */
	show_status(q, getpid());
	/* a non-empty queue does not notify again */
	EXPECT(mq_notify(q, &ev), 0);
	EXPECT(mq_send(q, "more", 4, 0), 0);
	ts = (struct timespec){0, 100000000};
	EXPECT_ERR(sigtimedwait(&set, &si, &ts), EAGAIN);
	EXPECT(mq_notify(q, NULL), 0);
	show_status(q, getpid());
	while (mq_receive(q, buf, sizeof buf, NULL) >= 0)
		;
	/* SIGEV_NONE: held, shown, nothing sent */
	ev.sigev_notify = SIGEV_NONE;
	EXPECT(mq_notify(q, &ev), 0);
	show_status(q, getpid());
	EXPECT(mq_send(q, "x", 1, 0), 0);
	EXPECT_ERR(sigtimedwait(&set, &si, &ts), EAGAIN);
	show_status(q, getpid());
	EXPECT(mq_notify(q, NULL), 0);
	/* signal 0 registers, sending nothing; 65 is no signal */
	ev.sigev_notify = SIGEV_SIGNAL;
	ev.sigev_signo = 0;
	EXPECT(mq_notify(q, &ev), 0);
	show_status(q, getpid());
	EXPECT(mq_notify(q, NULL), 0);
	ev.sigev_signo = 65;
	EXPECT_ERR(mq_notify(q, &ev), EINVAL);
	ev.sigev_notify = 77;
	EXPECT_ERR(mq_notify(q, &ev), EINVAL);
	/* closing a descriptor ends the closer's registration */
	ev.sigev_notify = SIGEV_SIGNAL;
	ev.sigev_signo = SIGUSR1;
	EXPECT(mq_receive(q, buf, sizeof buf, NULL), 1);
	int q2 = EXPECT_OK(mq_open(name_a, O_RDONLY));
	EXPECT(mq_notify(q2, &ev), 0);
	EXPECT(close(q2), 0);
	show_status(q, getpid());
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	EXPECT(close(q), 0);
}

static void readiness(void)
{
	struct mq_attr attr = {.mq_maxmsg = 2, .mq_msgsize = 8};
	int q = EXPECT_OK(mq_open(name_b, O_RDWR | O_CREAT | O_EXCL | O_NONBLOCK, 0640, &attr));
	struct pollfd pfd = {.fd = q, .events = POLLIN | POLLOUT};
	EXPECT(poll(&pfd, 1, 0), 1);
	SHOW("empty: revents=%#x", pfd.revents);
	mq_send(q, "a", 1, 0);
	EXPECT(poll(&pfd, 1, 0), 1);
	SHOW("one: revents=%#x", pfd.revents);
	mq_send(q, "b", 1, 0);
	EXPECT(poll(&pfd, 1, 0), 1);
	SHOW("full: revents=%#x", pfd.revents);
	fd_set r, w;
	FD_ZERO(&r);
	FD_ZERO(&w);
	FD_SET(q, &r);
	FD_SET(q, &w);
	struct timeval tv = {0, 0};
	EXPECT(select(q + 1, &r, &w, NULL, &tv), 1);
	SHOW("select: r=%d w=%d", FD_ISSET(q, &r), FD_ISSET(q, &w));
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event e = {.events = EPOLLIN | EPOLLOUT | EPOLLET}, out;
	EXPECT(epoll_ctl(ep, EPOLL_CTL_ADD, q, &e), 0);
	EXPECT(epoll_wait(ep, &out, 1, 0), 1);
	SHOW("epoll: events=%#x", out.events);
	EXPECT(epoll_wait(ep, &out, 1, 0), 0);
	char buf[8];
	mq_receive(q, buf, sizeof buf, NULL);
	EXPECT(epoll_wait(ep, &out, 1, 0), 1);
	SHOW("epoll after receive: events=%#x", out.events);
	mq_receive(q, buf, sizeof buf, NULL);
	/* a blocked epoll_wait woken by a send from another process */
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		usleep(100000);
		_exit(mq_send(q, "c", 1, 0) == 0 ? 0 : 1);
	}
	e.events = EPOLLIN;
	EXPECT(epoll_ctl(ep, EPOLL_CTL_MOD, q, &e), 0);
	EXPECT(epoll_wait(ep, &out, 1, 5000), 1);
	int st;
	waitpid(pid, &st, 0);
	close(ep);
	/* a queue outlives its name while open */
	EXPECT(mq_unlink(name_b), 0);
	EXPECT_ERR(mq_open(name_b, O_RDWR), ENOENT);
	EXPECT(mq_receive(q, buf, sizeof buf, NULL), 1);
	int q3 = EXPECT_OK(mq_open(name_b, O_RDWR | O_CREAT | O_EXCL, 0600, NULL));
	struct mq_attr got;
	mq_getattr(q3, &got);
	SHOW("new queue, same name: maxmsg=%ld msgsize=%ld", got.mq_maxmsg, got.mq_msgsize);
	EXPECT(mq_unlink(name_b), 0);
	close(q3);
	close(q);
}

/* The mqueue file system: the sandbox's /dev/mqueue, or natively one
 * mounted in a private mount namespace (the host need not have one). */
static void filesystem(void)
{
	char dir[64] = "/dev/mqueue";
	int mounted = 0;
	struct stat sb;
	if (stat(dir, &sb) != 0) {
		strcpy(dir, "/tmp/mqfs-XXXXXX");
		if (unshare(CLONE_NEWNS) != 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 || !mkdtemp(dir) ||
		    mount("mqueue", dir, "mqueue", 0, NULL) != 0) {
			SHOW("cannot mount an mqueue file system natively: %s", strerror(errno));
			t_failures++;
			return;
		}
		mounted = 1;
	}
	EXPECT(stat(dir, &sb), 0);
	SHOW("dir: mode=%o", sb.st_mode);
	struct statfs sf;
	EXPECT(statfs(dir, &sf), 0);
	SHOW("statfs: mqueue=%d", sf.f_type == 0x19800202);
	struct mq_attr attr = {.mq_maxmsg = 3, .mq_msgsize = 32};
	int q = EXPECT_OK(mq_open(name_c, O_RDWR | O_CREAT | O_EXCL, 0640, &attr));
	EXPECT(mq_send(q, "hello", 5, 0), 0);
	EXPECT(mq_send(q, "world!", 6, 0), 0);
	char path[128], buf[128] = {0};
	snprintf(path, sizeof path, "%s%s", dir, name_c);
	EXPECT(stat(path, &sb), 0);
	SHOW("file: reg=%d mode=%o size=%ld uid=%d", S_ISREG(sb.st_mode), sb.st_mode & 07777,
	     (long)sb.st_size, sb.st_uid);
	int fd = EXPECT_OK(open(path, O_RDONLY));
	EXPECT(read(fd, buf, sizeof buf - 1), 60);
	SHOW("line: %s", buf);
	/* the file is the queue itself */
	EXPECT(mq_receive(fd, buf, sizeof buf, NULL), 5);
	EXPECT(close(fd), 0);
	DIR *d = opendir(dir);
	int seen = 0;
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, name_c + 1) == 0)
			seen = de->d_type == DT_REG ? 1 : 2;
	if (d)
		closedir(d);
	EXPECT(seen, 1);
	EXPECT(unlink(path), 0);
	EXPECT_ERR(mq_open(name_c, O_RDWR), ENOENT);
	EXPECT_ERR(stat(path, &sb), ENOENT);
	EXPECT(mq_receive(q, buf, sizeof buf, NULL), 6);
	EXPECT(close(q), 0);
	/* creating a file makes a queue with the default attributes */
	snprintf(path, sizeof path, "%s%s", dir, name_d);
	fd = EXPECT_OK(open(path, O_RDWR | O_CREAT | O_EXCL, 0600));
	struct mq_attr got;
	EXPECT(mq_getattr(fd, &got), 0);
	SHOW("created by open: maxmsg=%ld msgsize=%ld", got.mq_maxmsg, got.mq_msgsize);
	EXPECT(close(fd), 0);
	EXPECT(mq_unlink(name_d), 0);
	if (mounted) {
		umount(dir);
		rmdir(dir);
	}
}

int main(void)
{
	t_as_child();
	int pid = getpid();
	snprintf(name_a, sizeof name_a, "/mqb-%d-a", pid);
	snprintf(name_b, sizeof name_b, "/mqb-%d-b", pid);
	snprintf(name_c, sizeof name_c, "/mqb-%d-c", pid);
	snprintf(name_d, sizeof name_d, "/mqb-%d-d", pid);
	umask(022);
	names_and_limits();
	messages();
	notification();
	readiness();
	filesystem();
	EXPECT(mq_unlink(name_a), 0);
	return t_done();
}
