/*
 * Shared by the TCP guests: a listener on 127.0.0.1, a connection to it,
 * TCP_NODELAY, exact reads and writes, and reaping the forked peer.
 *
 * Every failure exits non-zero with a message: a guest that could not
 * connect must neither print a time nor hang. The listener takes an
 * ephemeral port (bind to port 0, then getsockname) so concurrent runs, and
 * a host service on some fixed port, never collide with it.
 */
#ifndef TCP_COMMON_H
#define TCP_COMMON_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest_common.h"

/* The process that forked the peer; 0 until fork_or_exit. */
static pid_t tcp_guest_parent;

/*
 * Ends this process with status 1 after a failure (the caller has said
 * what failed). In the forked peer it first ends the parent too: the parent
 * may be blocked in accept for a connection that will now never come, and
 * would otherwise hang the benchmark instead of failing it. The getppid
 * check keeps the signal from reaching anyone else once the parent is gone.
 */
static inline _Noreturn void fail(void)
{
	if (tcp_guest_parent != 0 && getpid() != tcp_guest_parent &&
	    getppid() == tcp_guest_parent)
		kill(tcp_guest_parent, SIGTERM);
	_exit(1);
}

/*
 * A listening socket on 127.0.0.1 and an ephemeral port; its address goes
 * to *addr, for connect_loopback.
 */
static inline int listen_loopback(struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0) {
		perror("socket");
		fail();
	}
	*addr = (struct sockaddr_in){
		.sin_family = AF_INET,
		.sin_port = 0,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	if (bind(fd, (struct sockaddr *)addr, sizeof(*addr)) != 0) {
		perror("bind 127.0.0.1:0");
		fail();
	}
	if (listen(fd, 16) != 0) {
		perror("listen");
		fail();
	}
	if (getsockname(fd, (struct sockaddr *)addr, &len) != 0 ||
	    len != sizeof(*addr) || addr->sin_port == 0) {
		perror("getsockname");
		fail();
	}
	return fd;
}

/* A new connection to `addr`. */
static inline int connect_loopback(const struct sockaddr_in *addr)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0) {
		perror("socket");
		fail();
	}
	if (connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) != 0) {
		perror("connect 127.0.0.1");
		fail();
	}
	return fd;
}

/* accept(2) on `listener`. */
static inline int accept_one(int listener)
{
	int fd = accept(listener, NULL, NULL);

	if (fd < 0) {
		perror("accept");
		fail();
	}
	return fd;
}

/* Sends every segment at once instead of waiting for Nagle (tcp(7)). */
static inline void set_nodelay(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
		perror("setsockopt TCP_NODELAY");
		fail();
	}
}

/* Writes exactly one byte. */
static inline void put_byte(int fd, char c)
{
	if (write(fd, &c, 1) != 1) {
		perror("write 1 byte");
		fail();
	}
}

/* Reads one byte: returns 1, or 0 at end of file. */
static inline int get_byte(int fd, char *c)
{
	ssize_t got = read(fd, c, 1);

	if (got < 0) {
		perror("read 1 byte");
		fail();
	}
	return got == 1;
}

/* Reaps `pid` and fails unless it exited with status 0. */
static inline void reap_ok(pid_t pid, const char *what)
{
	int status;

	if (wait4(pid, &status, 0, NULL) != pid) {
		perror("wait4");
		fail();
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "%s ended with status %#x\n", what, status);
		fail();
	}
}

/* fork(2), remembering the parent for fail(). */
static inline pid_t fork_or_exit(void)
{
	pid_t pid;

	tcp_guest_parent = getpid();
	pid = fork();
	if (pid < 0) {
		perror("fork");
		fail();
	}
	return pid;
}

#endif
