/* mq_notify with SIGEV_THREAD: glibc's way (a netlink socket the kernel
 * posts a 32-byte cookie to, read by a helper thread that then runs the
 * function in a thread of its own), and the raw system call beneath it:
 * the cookie posted back with its last byte 1 when a message arrives and 2
 * when the registration ends unused (mq_notify(NULL), a close), and the
 * errnos of a bad socket descriptor or cookie pointer. Queue names carry
 * the pid, since natively they are host-wide; they are never printed. */
/* link: -lrt -lpthread */
#include "t.h"
#include <mqueue.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/socket.h>
#include <linux/netlink.h>

static sem_t ran;
static pthread_t main_thread;
static volatile int got_value = -1;
static volatile int got_other_thread;

static void on_message(union sigval v)
{
	got_value = v.sival_int;
	got_other_thread = !pthread_equal(pthread_self(), main_thread);
	sem_post(&ran);
}

/* Waits up to two seconds for the notification function. */
static int wait_ran(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 2;
	while (sem_timedwait(&ran, &ts) != 0) {
		if (errno != EINTR)
			return -1;
	}
	return 0;
}

static void through_glibc(const char *name)
{
	struct mq_attr attr = {.mq_maxmsg = 4, .mq_msgsize = 16};
	mqd_t q = mq_open(name, O_RDWR | O_CREAT | O_EXCL, 0600, &attr);
	EXPECT_TRUE(q >= 0);
	struct sigevent sev = {0};
	sev.sigev_notify = SIGEV_THREAD;
	sev.sigev_notify_function = on_message;
	sev.sigev_value.sival_int = 42;
	EXPECT(mq_notify(q, &sev), 0);
	/* One registration per queue. */
	EXPECT_ERR(mq_notify(q, &sev), EBUSY);
	EXPECT(mq_send(q, "hi", 2, 0), 0);
	EXPECT(wait_ran(), 0);
	EXPECT(got_value, 42);
	EXPECT_TRUE(got_other_thread);
	/* Delivered: the registration is gone and can be made again. */
	sev.sigev_value.sival_int = 7;
	EXPECT(mq_notify(q, &sev), 0);
	/* Dropped unused, then made again: glibc frees what it kept. */
	EXPECT(mq_notify(q, NULL), 0);
	EXPECT(mq_notify(q, &sev), 0);
	/* The queue is not empty: a message into a non-empty queue notifies
	 * nobody. */
	EXPECT(mq_send(q, "x", 1, 0), 0);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 200000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	EXPECT_ERR(sem_timedwait(&ran, &ts), ETIMEDOUT);
	char buf[16];
	EXPECT(mq_receive(q, buf, sizeof buf, NULL), 2);
	EXPECT(mq_receive(q, buf, sizeof buf, NULL), 1);
	EXPECT(mq_send(q, "again", 5, 0), 0);
	EXPECT(wait_ran(), 0);
	EXPECT(got_value, 7);
	EXPECT(mq_close(q), 0);
	EXPECT(mq_unlink(name), 0);
}

static long raw_notify(int q, int sock, void *cookie)
{
	struct sigevent sev;
	memset(&sev, 0, sizeof sev);
	sev.sigev_notify = SIGEV_THREAD;
	sev.sigev_signo = sock;
	sev.sigev_value.sival_ptr = cookie;
	return syscall(SYS_mq_notify, q, &sev);
}

/* Reads one posted cookie; prints its length and last byte and whether the
 * rest is the cookie given. */
static void show_posted(int nl, const unsigned char *cookie)
{
	unsigned char buf[64];
	long n = recv(nl, buf, sizeof buf, MSG_DONTWAIT);
	if (n < 0) {
		SHOW("posted: none (%s)", errname(errno));
		t_failures++;
		return;
	}
	int same = n == 32 && memcmp(buf, cookie, 31) == 0;
	SHOW("posted: len=%ld last=%d rest_same=%s", n, n > 0 ? buf[n - 1] : -1,
	     same ? "yes" : "no");
	if (!same)
		t_failures++;
}

static void raw_calls(const char *name)
{
	struct mq_attr attr = {.mq_maxmsg = 4, .mq_msgsize = 16};
	int q = mq_open(name, O_RDWR | O_CREAT | O_EXCL, 0600, &attr);
	EXPECT_TRUE(q >= 0);
	int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	EXPECT_TRUE(nl >= 0);
	unsigned char cookie[32];
	for (int i = 0; i < 32; i++)
		cookie[i] = (unsigned char)(0xa0 + i);

	/* The socket must be a netlink socket; the cookie must be readable. */
	int p[2];
	EXPECT(pipe(p), 0);
	EXPECT_ERR(raw_notify(q, p[0], cookie), ENOTSOCK);
	int sv[2];
	EXPECT(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
	EXPECT_ERR(raw_notify(q, sv[0], cookie), EINVAL);
	EXPECT_ERR(raw_notify(q, 999, cookie), EBADF);
	EXPECT_ERR(raw_notify(q, nl, BADPTR), EFAULT);
	EXPECT_ERR(raw_notify(999, nl, cookie), EBADF);

	/* A message arrives: the cookie comes back marked 1. */
	EXPECT(raw_notify(q, nl, cookie), 0);
	EXPECT(mq_send(q, "m", 1, 0), 0);
	show_posted(nl, cookie);
	char buf[16];
	EXPECT(mq_receive(q, buf, sizeof buf, NULL), 1);

	/* Unregistered: marked 2. */
	EXPECT(raw_notify(q, nl, cookie), 0);
	EXPECT(syscall(SYS_mq_notify, q, NULL), 0);
	show_posted(nl, cookie);

	/* Closed by the registered process: marked 2 as well. The socket's
	 * descriptor may close first: the registration holds the socket. */
	int nl2 = dup(nl);
	EXPECT(raw_notify(q, nl2, cookie), 0);
	EXPECT(close(nl2), 0);
	EXPECT(close(q), 0);
	show_posted(nl, cookie);

	/* A send that finds no registration posts nothing. */
	q = mq_open(name, O_RDWR);
	EXPECT_TRUE(q >= 0);
	EXPECT(mq_send(q, "n", 1, 0), 0);
	EXPECT_ERR(recv(nl, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
	EXPECT(close(q), 0);
	EXPECT(mq_unlink(name), 0);
	close(nl);
	close(p[0]);
	close(p[1]);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	char a[64], b[64];
	snprintf(a, sizeof a, "/ferrovisor-mqt-a-%d", (int)getpid());
	snprintf(b, sizeof b, "/ferrovisor-mqt-b-%d", (int)getpid());
	main_thread = pthread_self();
	sem_init(&ran, 0, 0);
	through_glibc(a);
	raw_calls(b);
	return t_done();
}
