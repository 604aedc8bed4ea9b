/* Answers Python's test suites found wrong (issue 20): lseek on an
 * O_TMPFILE file, SEEK_DATA/SEEK_HOLE on tmpfs, SO_PROTOCOL of a Unix
 * socket, SO_BROADCAST of a UDP one, epoll_ctl on a regular file. */
#include "t.h"
#include <sys/epoll.h>
#include <sys/socket.h>
#include <netinet/in.h>

int main(void)
{
	int fd = CHECK(open("/tmp", O_TMPFILE | O_RDWR, 0600));
	EXPECT(write(fd, "hello", 5), 5);
	EXPECT(lseek(fd, 0, SEEK_END), 5);
	EXPECT(lseek(fd, -2, SEEK_END), 3);
	EXPECT(lseek(fd, 0, SEEK_DATA), 0);
	EXPECT(lseek(fd, 0, SEEK_HOLE), 5);
	EXPECT_ERR(lseek(fd, 5, SEEK_DATA), ENXIO);
	EXPECT_ERR(lseek(fd, -1, SEEK_HOLE), ENXIO);

	int mfd = CHECK(memfd_create("m", 0));
	EXPECT(write(mfd, "abc", 3), 3);
	EXPECT(lseek(mfd, 0, SEEK_HOLE), 3);

	int ep = CHECK(epoll_create1(0));
	struct epoll_event ev = {.events = EPOLLIN};
	EXPECT_ERR(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), EPERM);
	EXPECT_ERR(epoll_ctl(ep, EPOLL_CTL_ADD, mfd, &ev), EPERM);
	int d = CHECK(open("/tmp", O_RDONLY | O_DIRECTORY));
	EXPECT_ERR(epoll_ctl(ep, EPOLL_CTL_ADD, d, &ev), EPERM);

	int v = -1;
	socklen_t len = sizeof v;
	int u = CHECK(socket(AF_UNIX, SOCK_STREAM, 0));
	EXPECT_OK(getsockopt(u, SOL_SOCKET, SO_PROTOCOL, &v, &len));
	EXPECT(v, 0);
	int g = CHECK(socket(AF_INET, SOCK_DGRAM, 0));
	len = sizeof v;
	EXPECT_OK(getsockopt(g, SOL_SOCKET, SO_BROADCAST, &v, &len));
	EXPECT(v, 0);
	int one = 1;
	EXPECT_OK(setsockopt(g, SOL_SOCKET, SO_BROADCAST, &one, sizeof one));
	EXPECT_OK(getsockopt(g, SOL_SOCKET, SO_BROADCAST, &v, &len));
	EXPECT(v, 1);
	EXPECT_OK(getsockopt(g, SOL_SOCKET, SO_PROTOCOL, &v, &len));
	EXPECT(v, IPPROTO_UDP);
	return t_done();
}
