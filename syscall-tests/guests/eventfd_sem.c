/* eventfd: counter mode (a read takes the whole count) and EFD_SEMAPHORE
 * (a read takes one), non-blocking EAGAIN, overflow, poll readiness, and a
 * blocked reader woken from another thread. */
#include "t.h"
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>

static int gfd;
static void *bump(void *arg)
{
	(void)arg;
	usleep(100000);
	uint64_t one = 3;
	write(gfd, &one, 8);
	return NULL;
}

int main(void)
{
	uint64_t v;
	int fd = EXPECT(eventfd(5, EFD_NONBLOCK), 3);
	EXPECT(read(fd, &v, 8), 8);
	EXPECT(v, 5);
	EXPECT_ERR(read(fd, &v, 8), EAGAIN);
	v = 2;
	EXPECT(write(fd, &v, 8), 8);
	EXPECT(write(fd, &v, 8), 8);
	EXPECT(read(fd, &v, 8), 8);
	EXPECT(v, 4);
	EXPECT_ERR(read(fd, &v, 4), EINVAL);
	EXPECT_ERR(write(fd, &v, 4), EINVAL);
	v = UINT64_MAX;
	EXPECT_ERR(write(fd, &v, 8), EINVAL);
	v = UINT64_MAX - 1;
	EXPECT(write(fd, &v, 8), 8);
	v = 1;
	EXPECT_ERR(write(fd, &v, 8), EAGAIN);
	struct pollfd pf = {fd, POLLIN | POLLOUT, 0};
	EXPECT(poll(&pf, 1, 0), 1);
	EXPECT(pf.revents, POLLIN);
	EXPECT(read(fd, &v, 8), 8);
	EXPECT(poll(&pf, 1, 0), 1);
	EXPECT(pf.revents, POLLOUT);
	close(fd);

	/* Semaphore mode. */
	fd = EXPECT(eventfd(3, EFD_SEMAPHORE | EFD_NONBLOCK | EFD_CLOEXEC), 3);
	EXPECT(fcntl(fd, F_GETFD), FD_CLOEXEC);
	for (int i = 0; i < 3; i++) {
		EXPECT(read(fd, &v, 8), 8);
		EXPECT(v, 1);
	}
	EXPECT_ERR(read(fd, &v, 8), EAGAIN);
	/* Blocking semaphore read woken by another thread. */
	EXPECT(fcntl(fd, F_SETFL, 0), 0);
	gfd = fd;
	pthread_t t;
	pthread_create(&t, NULL, bump, NULL);
	EXPECT(read(fd, &v, 8), 8);
	EXPECT(v, 1);
	pthread_join(t, NULL);
	EXPECT(read(fd, &v, 8), 8);
	EXPECT(read(fd, &v, 8), 8);
	EXPECT(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	EXPECT_ERR(read(fd, &v, 8), EAGAIN);
	/* /proc/self/fdinfo shows the counter. */
	v = 6;
	write(fd, &v, 8);
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
	EXPECT_TRUE(t_slurp(path, buf, sizeof buf) > 0);
	char *cnt = strstr(buf, "eventfd-count:");
	EXPECT_TRUE(cnt != NULL);
	EXPECT(cnt ? strtoull(cnt + 14, NULL, 16) : 0, 6);
	EXPECT_ERR(eventfd(0, 0x2), EINVAL);
	return t_done();
}
