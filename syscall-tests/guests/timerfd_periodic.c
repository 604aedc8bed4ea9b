/* timerfd: a periodic timer's expiration count, blocking and non-blocking
 * reads, timerfd_gettime, disarming, TFD_TIMER_ABSTIME, and epoll on it. */
#include "t.h"
#include <poll.h>
#include <sys/timerfd.h>
#include <time.h>

int main(void)
{
	int fd = EXPECT(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC), 3);
	uint64_t n;
	EXPECT_ERR(read(fd, &n, 8), EAGAIN);
	struct itimerspec its = {{0, 50000000}, {0, 50000000}}, cur;
	EXPECT(timerfd_settime(fd, 0, &its, NULL), 0);
	EXPECT(timerfd_gettime(fd, &cur), 0);
	EXPECT(cur.it_interval.tv_nsec, 50000000);
	EXPECT_TRUE(cur.it_value.tv_sec == 0 && cur.it_value.tv_nsec > 0 && cur.it_value.tv_nsec <= 50000000);
	/* After ~275 ms, about 5 expirations are counted. */
	usleep(275000);
	EXPECT(read(fd, &n, 8), 8);
	EXPECT_TRUE(n >= 4 && n < 1000);
	EXPECT_ERR(read(fd, &n, 8), EAGAIN);
	/* Blocking read waits for the next one and returns 1. */
	EXPECT(fcntl(fd, F_SETFL, 0), 0);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int ones = 0;
	for (int i = 0; i < 4; i++) {
		EXPECT(read(fd, &n, 8), 8);
		ones += n == 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	EXPECT_TRUE(ones >= 1);
	EXPECT_TRUE(ms >= 140 && ms < 2000);
	/* poll sees it. */
	struct pollfd pf = {fd, POLLIN, 0};
	EXPECT(poll(&pf, 1, 1000), 1);
	EXPECT(pf.revents, POLLIN);
	EXPECT_ERR(read(fd, &n, 4), EINVAL);
	/* Disarm: the old value comes back, nothing more expires. */
	struct itimerspec zero = {{0, 0}, {0, 0}}, old;
	EXPECT(timerfd_settime(fd, 0, &zero, &old), 0);
	EXPECT(old.it_interval.tv_nsec, 50000000);
	EXPECT(timerfd_gettime(fd, &cur), 0);
	EXPECT_TRUE(cur.it_value.tv_sec == 0 && cur.it_value.tv_nsec == 0);
	EXPECT(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	read(fd, &n, 8);
	usleep(120000);
	EXPECT_ERR(read(fd, &n, 8), EAGAIN);
	/* Absolute one-shot on CLOCK_REALTIME. */
	int rfd = EXPECT(timerfd_create(CLOCK_REALTIME, 0), 4);
	struct itimerspec abs = {{0, 0}, {0, 0}};
	clock_gettime(CLOCK_REALTIME, &abs.it_value);
	abs.it_value.tv_nsec += 100000000;
	if (abs.it_value.tv_nsec >= 1000000000) {
		abs.it_value.tv_sec++;
		abs.it_value.tv_nsec -= 1000000000;
	}
	EXPECT(timerfd_settime(rfd, TFD_TIMER_ABSTIME, &abs, NULL), 0);
	EXPECT(read(rfd, &n, 8), 8);
	EXPECT(n, 1);
	/* Already in the past: fires at once. */
	abs.it_value.tv_sec -= 10;
	EXPECT(timerfd_settime(rfd, TFD_TIMER_ABSTIME, &abs, NULL), 0);
	EXPECT(read(rfd, &n, 8), 8);
	EXPECT(n, 1);
	/* Errors. */
	EXPECT_ERR(timerfd_create(12345, 0), EINVAL);
	EXPECT_ERR(timerfd_create(CLOCK_MONOTONIC, 0x1), EINVAL);
	struct itimerspec bad = {{0, 0}, {0, 1000000000}};
	EXPECT_ERR(timerfd_settime(fd, 0, &bad, NULL), EINVAL);
	EXPECT_ERR(timerfd_settime(0, 0, &its, NULL), EINVAL);
	return t_done();
}
