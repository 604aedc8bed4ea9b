/* seccomp user notification (seccomp_unotify(2)): a filter made with a
 * listener sends its SECCOMP_RET_USER_NOTIF calls to whoever holds the
 * listener, who receives each, answers with a value, an error or "make
 * the call", or gives the caller a descriptor. A signal withdraws a
 * waiting call (restarted with SA_RESTART); closing the listener fails
 * waiting and later calls with ENOSYS; the listener hangs up once no
 * thread has its filter. The main thread is the filtered one, a
 * supervisor thread made before the filter answers. */
#include "t.h"
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
/* link: -pthread */

#define LEN(a) (sizeof(a) / sizeof((a)[0]))
#define LD_NR BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))
#define ON(n, v) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (n), 0, 1), RET(v)

static struct sock_filter notify_ppid[] = {
	LD_NR,
	ON(SYS_getppid, SECCOMP_RET_USER_NOTIF),
	RET(SECCOMP_RET_ALLOW),
};

static long install_listener(void)
{
	struct sock_fprog p = {.len = LEN(notify_ppid), .filter = notify_ppid};
	return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &p);
}

static int listener = -1;
static pid_t target;
static int start[2], source[2];

/* What the supervisor saw, per step; printed by the main thread. */
#define STEPS 8
static struct {
	int pollin, pollout, right_call, valid, answered;
} seen[STEPS + 1];
static int bad_continue, bad_flags, unknown_id, added, set_at, withdrawn[STEPS + 1], restarted;

static int id_valid(__u64 id)
{
	return ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

static int receive(struct seccomp_notif *n, int step)
{
	memset(n, 0, sizeof *n);
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, n) != 0)
		return -1;
	seen[step].right_call = n->data.nr == SYS_getppid && n->data.arch == AUDIT_ARCH_X86_64 &&
				(pid_t)n->pid == target && n->data.args[0] == (__u64)step;
	return 0;
}

static int answer(__u64 id, long val, int error, unsigned flags)
{
	struct seccomp_notif_resp r = {.id = id, .val = val, .error = error, .flags = flags};
	return ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &r) == 0;
}

static void wait_withdrawn(__u64 id, int step)
{
	for (int i = 0; i < 5000 && id_valid(id); i++)
		usleep(1000);
	withdrawn[step] = !id_valid(id);
}

static void *supervisor(void *arg)
{
	(void)arg;
	char c;
	if (read(start[0], &c, 1) != 1)
		return NULL;
	for (int step = 1; step < STEPS; step++) {
		struct pollfd pf = {.fd = listener, .events = POLLIN};
		seen[step].pollin = poll(&pf, 1, 10000) == 1 && pf.revents == POLLIN;
		struct seccomp_notif n;
		if (receive(&n, step))
			continue;
		pf.events = POLLIN | POLLOUT;
		seen[step].pollout = poll(&pf, 1, 0) == 1 && pf.revents == POLLOUT;
		seen[step].valid = id_valid(n.id);
		struct seccomp_notif_addfd a = {.id = n.id, .srcfd = source[0]};
		switch (step) {
		case 1:
			seen[step].answered = answer(n.id, 4242, 0, 0);
			break;
		case 2:
			seen[step].answered = answer(n.id, 0, -EPERM, 0);
			break;
		case 3:
			errno = 0;
			bad_continue = !answer(n.id, 1, 0, SECCOMP_USER_NOTIF_FLAG_CONTINUE) && errno == EINVAL;
			errno = 0;
			bad_flags = !answer(n.id, 0, 0, 2) && errno == EINVAL;
			errno = 0;
			unknown_id = !answer(n.id + 1000, 0, 0, 0) && errno == ENOENT;
			seen[step].answered = answer(n.id, 0, 0, SECCOMP_USER_NOTIF_FLAG_CONTINUE);
			break;
		case 4:
			/* the descriptor is the call's answer */
			a.flags = SECCOMP_ADDFD_FLAG_SEND;
			added = ioctl(listener, SECCOMP_IOCTL_NOTIF_ADDFD, &a) >= 0;
			seen[step].answered = 1;
			break;
		case 5:
			a.flags = SECCOMP_ADDFD_FLAG_SETFD;
			a.newfd = 50;
			a.newfd_flags = O_CLOEXEC;
			set_at = ioctl(listener, SECCOMP_IOCTL_NOTIF_ADDFD, &a);
			seen[step].answered = answer(n.id, 0, 0, 0);
			break;
		case 6:
			/* a signal withdraws the call; with SA_RESTART it comes
			 * again */
			syscall(SYS_tgkill, target, target, SIGUSR1);
			wait_withdrawn(n.id, step);
			if (receive(&n, step) == 0) {
				restarted = seen[step].right_call;
				seen[step].answered = answer(n.id, 77, 0, 0);
			}
			break;
		case 7:
			syscall(SYS_tgkill, target, target, SIGUSR1);
			wait_withdrawn(n.id, step);
			seen[step].answered = 1;
			break;
		}
	}
	/* a call waits; closing the listener ends it with ENOSYS */
	struct pollfd pf = {.fd = listener, .events = POLLIN};
	seen[STEPS].pollin = poll(&pf, 1, 10000) == 1 && pf.revents == POLLIN;
	close(listener);
	return NULL;
}

static int stayed;

static void *killable_supervisor(void *arg)
{
	(void)arg;
	struct seccomp_notif n;
	if (receive(&n, 0))
		return NULL;
	syscall(SYS_tgkill, target, target, SIGUSR1);
	usleep(100000);
	stayed = id_valid(n.id) && n.data.args[0] == 10;
	answer(n.id, 5, 0, 0);
	return NULL;
}

static volatile int handled;

static void on_usr1(int sig)
{
	(void)sig;
	handled++;
}

static void *own_listener(void *arg)
{
	/* a listener for a filter only this thread has */
	*(long *)arg = install_listener();
	return NULL;
}

int main(void)
{
	pid_t real_ppid = getppid();
	target = getpid();
	EXPECT(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	EXPECT(pipe(start), 0);
	EXPECT(pipe(source), 0);
	pthread_t sup;
	EXPECT_RC(pthread_create(&sup, NULL, supervisor, NULL), 0);

	listener = install_listener();
	EXPECT_TRUE(listener > 0);
	EXPECT(prctl(PR_GET_SECCOMP), 2);
	EXPECT(fcntl(listener, F_GETFD), FD_CLOEXEC);
	char path[64], link[64] = {0};
	snprintf(path, sizeof path, "/proc/self/fd/%d", listener);
	EXPECT_OK(readlink(path, link, sizeof link - 1));
	SHOW("listener: %s", link);
	/* one listener per thread's chain */
	EXPECT_ERR(install_listener(), EBUSY);
	struct pollfd pf = {.fd = listener, .events = POLLIN | POLLOUT};
	EXPECT(poll(&pf, 1, 0), 0);
	struct seccomp_notif n;
	memset(&n, 0, sizeof n);
	n.flags = 1;
	EXPECT_ERR(ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &n), EINVAL);
	__u64 id = 12345;
	EXPECT_ERR(ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id), ENOENT);
	struct seccomp_notif_resp r = {.id = 12345};
	EXPECT_ERR(ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &r), ENOENT);
	EXPECT_ERR(ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, BADPTR), EFAULT);
	EXPECT_ERR(ioctl(listener, _IOW('!', 9, __u64), &id), EINVAL);
	EXPECT_ERR(read(listener, &n, sizeof n), EINVAL);

	EXPECT(write(start[1], "g", 1), 1);
	EXPECT(syscall(SYS_getppid, 1), 4242);
	EXPECT_ERR(syscall(SYS_getppid, 2), EPERM);
	EXPECT_TRUE(syscall(SYS_getppid, 3) == real_ppid);
	long fd = syscall(SYS_getppid, 4);
	EXPECT_TRUE(fd > 2 && fcntl(fd, F_GETFD) == 0);
	char c = 0;
	EXPECT(write(source[1], "x", 1), 1);
	EXPECT(read(fd, &c, 1), 1);
	EXPECT(c, 'x');
	EXPECT(syscall(SYS_getppid, 5), 0);
	EXPECT(fcntl(50, F_GETFD), FD_CLOEXEC);
	struct sigaction sa = {0};
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART;
	EXPECT(sigaction(SIGUSR1, &sa, NULL), 0);
	EXPECT(syscall(SYS_getppid, 6), 77);
	EXPECT(handled, 1);
	sa.sa_flags = 0;
	EXPECT(sigaction(SIGUSR1, &sa, NULL), 0);
	EXPECT_ERR(syscall(SYS_getppid, 7), EINTR);
	EXPECT(handled, 2);
	EXPECT_ERR(syscall(SYS_getppid, 8), ENOSYS);
	EXPECT_ERR(syscall(SYS_getppid, 9), ENOSYS);
	EXPECT_RC(pthread_join(sup, NULL), 0);

	for (int s = 1; s <= STEPS; s++)
		SHOW("step %d: pollin %d pollout %d call %d valid %d answered %d withdrawn %d", s,
		     seen[s].pollin, seen[s].pollout, seen[s].right_call, seen[s].valid, seen[s].answered,
		     withdrawn[s]);
	EXPECT_TRUE(bad_continue && bad_flags && unknown_id);
	EXPECT_TRUE(added && restarted);
	EXPECT(set_at, 50);

	/* a filter no thread has any more: its listener hangs up */
	long own = -1;
	pthread_t t;
	EXPECT_RC(pthread_create(&t, NULL, own_listener, &own), 0);
	EXPECT_RC(pthread_join(t, NULL), 0);
	EXPECT_TRUE(own > 0);
	pf.fd = own;
	pf.events = POLLIN;
	EXPECT(poll(&pf, 1, 10000), 1);
	EXPECT(pf.revents, POLLHUP);
	/* the first listener is closed: another may be made; with
	 * WAIT_KILLABLE_RECV a call once received waits on through signals
	 * that do not kill */
	struct sock_fprog p = {.len = LEN(notify_ppid), .filter = notify_ppid};
	listener = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			   SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, &p);
	EXPECT_TRUE(listener > 0);
	pthread_t k;
	EXPECT_RC(pthread_create(&k, NULL, killable_supervisor, NULL), 0);
	EXPECT(syscall(SYS_getppid, 10), 5);
	/* (the signal was taken after the call) */
	EXPECT(handled, 3);
	EXPECT_RC(pthread_join(k, NULL), 0);
	EXPECT(stayed, 1);
	return t_done();
}
