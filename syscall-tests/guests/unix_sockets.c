/* Unix sockets in the Sentry (issue 7 point 1): stream, datagram and
 * seqpacket; socketpair; pathname and abstract addresses; SCM_RIGHTS and
 * SCM_CREDENTIALS; SO_PEERCRED; shutdown; MSG_PEEK, MSG_DONTWAIT,
 * MSG_NOSIGNAL, MSG_TRUNC. Buffer limits are unix_dgram_buf's and
 * unix_stream_sndbuf's. */
#include "t.h"
#include <poll.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>

static int sigpipes;

static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

static socklen_t path_addr(struct sockaddr_un *a, const char *path)
{
	memset(a, 0, sizeof *a);
	a->sun_family = AF_UNIX;
	strcpy(a->sun_path, path);
	return offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1;
}

/* An abstract name: a NUL, then `name` (not NUL-terminated). */
static socklen_t abstract_addr(struct sockaddr_un *a, const char *name)
{
	memset(a, 0, sizeof *a);
	a->sun_family = AF_UNIX;
	memcpy(a->sun_path + 1, name, strlen(name));
	return offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name);
}

static int readable(int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };
	return poll(&p, 1, 0) == 1 ? p.revents : 0;
}

/* Sends one byte with `fd` attached as SCM_RIGHTS. */
static ssize_t send_fd(int s, int fd)
{
	char byte = 'F';
	struct iovec iov = { &byte, 1 };
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} c;
	memset(&c, 0, sizeof c);
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.b,
			    .msg_controllen = sizeof c.b };
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof fd);
	return sendmsg(s, &m, 0);
}

/* Receives one byte and the descriptor that came with it (-1 if none). */
static int recv_fd(int s, int flags)
{
	char byte;
	struct iovec iov = { &byte, 1 };
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} c;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.b,
			    .msg_controllen = sizeof c.b };
	if (recvmsg(s, &m, flags) != 1)
		return -2;
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	if (!h || h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS ||
	    h->cmsg_len != CMSG_LEN(sizeof(int)))
		return -1;
	int fd;
	memcpy(&fd, CMSG_DATA(h), sizeof fd);
	return fd;
}

static void pairs_and_flags(void)
{
	int sv[2];
	char buf[64];

	SHOW("-- stream socketpair, MSG_PEEK, MSG_DONTWAIT, FIONREAD");
	EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	EXPECT_ERR(recv(sv[1], buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
	EXPECT(send(sv[0], "hello", 5, 0), 5);
	EXPECT(send(sv[0], "world", 5, 0), 5);
	int n = -1;
	EXPECT(ioctl(sv[1], FIONREAD, &n), 0);
	EXPECT(n, 10);
	EXPECT(recv(sv[1], buf, 3, MSG_PEEK), 3);
	EXPECT(memcmp(buf, "hel", 3), 0);
	/* A stream read crosses the two writes. */
	EXPECT(recv(sv[1], buf, sizeof buf, 0), 10);
	EXPECT(memcmp(buf, "helloworld", 10), 0);
	int type = 0;
	socklen_t len = sizeof type;
	EXPECT(getsockopt(sv[0], SOL_SOCKET, SO_TYPE, &type, &len), 0);
	EXPECT(type, SOCK_STREAM);

	SHOW("-- shutdown");
	EXPECT(shutdown(sv[0], SHUT_WR), 0);
	EXPECT_TRUE(readable(sv[1]) & POLLIN);
	EXPECT(recv(sv[1], buf, sizeof buf, 0), 0);
	EXPECT(send(sv[1], "back", 4, 0), 4);
	EXPECT(recv(sv[0], buf, sizeof buf, 0), 4);
	EXPECT_ERR(send(sv[0], "x", 1, MSG_NOSIGNAL), EPIPE);
	EXPECT_ERR(shutdown(sv[0], 7), EINVAL);

	SHOW("-- MSG_NOSIGNAL and SIGPIPE");
	signal(SIGPIPE, on_sigpipe);
	close(sv[0]);
	EXPECT_ERR(send(sv[1], "x", 1, MSG_NOSIGNAL), EPIPE);
	EXPECT(sigpipes, 0);
	EXPECT_ERR(send(sv[1], "x", 1, 0), EPIPE);
	EXPECT(sigpipes, 1);
	EXPECT_ERR(write(sv[1], "x", 1), EPIPE);
	EXPECT(sigpipes, 2);
	EXPECT_TRUE(readable(sv[1]) & POLLHUP);
	close(sv[1]);

	SHOW("-- datagram socketpair: boundaries, MSG_TRUNC");
	EXPECT(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
	EXPECT(send(sv[0], "first-datagram", 14, 0), 14);
	EXPECT(send(sv[0], "second", 6, 0), 6);
	EXPECT(ioctl(sv[1], FIONREAD, &n), 0);
	EXPECT(n, 14);
	struct iovec iov = { buf, 5 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	EXPECT(recvmsg(sv[1], &m, 0), 5);
	EXPECT_TRUE(m.msg_flags & MSG_TRUNC);
	/* The rest of a truncated datagram is gone. */
	EXPECT(recv(sv[1], buf, 2, MSG_TRUNC), 6);
	EXPECT_ERR(recv(sv[1], buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
	EXPECT(send(sv[0], "", 0, 0), 0);
	EXPECT(recv(sv[1], buf, sizeof buf, 0), 0);
	close(sv[0]);
	close(sv[1]);

	SHOW("-- seqpacket socketpair: boundaries, MSG_TRUNC, EOF");
	EXPECT(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	EXPECT(send(sv[0], "abcdef", 6, 0), 6);
	EXPECT(send(sv[0], "gh", 2, 0), 2);
	EXPECT(recv(sv[1], buf, 4, MSG_PEEK), 4);
	EXPECT(recv(sv[1], buf, 4, MSG_TRUNC), 6);
	EXPECT(recv(sv[1], buf, sizeof buf, 0), 2);
	EXPECT(memcmp(buf, "gh", 2), 0);
	close(sv[0]);
	EXPECT(recv(sv[1], buf, sizeof buf, 0), 0);
	EXPECT_ERR(send(sv[1], "x", 1, MSG_NOSIGNAL), EPIPE);
	close(sv[1]);
}

static void rights_and_credentials(void)
{
	int sv[2], p[2];
	char buf[64];

	SHOW("-- SCM_RIGHTS");
	EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	EXPECT(pipe(p), 0);
	EXPECT(send_fd(sv[0], p[0]), 1);
	close(p[0]);
	int got = recv_fd(sv[1], MSG_CMSG_CLOEXEC);
	EXPECT_TRUE(got >= 0);
	EXPECT(fcntl(got, F_GETFD), FD_CLOEXEC);
	EXPECT(write(p[1], "through", 7), 7);
	EXPECT(read(got, buf, sizeof buf), 7);
	close(got);
	/* A descriptor passed to another process. */
	EXPECT(pipe(p), 0);
	pid_t child = fork();
	if (child == 0) {
		int fd = recv_fd(sv[1], 0);
		if (fd < 0 || write(fd, "child", 5) != 5)
			_exit(1);
		_exit(fcntl(fd, F_GETFD) == 0 ? 0 : 2);
	}
	EXPECT(send_fd(sv[0], p[1]), 1);
	close(p[1]);
	int st = -1;
	EXPECT_TRUE(waitpid(child, &st, 0) == child);
	EXPECT(st, 0);
	EXPECT(read(p[0], buf, sizeof buf), 5);
	close(p[0]);
	/* Not a descriptor: EBADF. */
	EXPECT_ERR(send_fd(sv[0], 999), EBADF);

	SHOW("-- SO_PEERCRED");
	struct ucred uc;
	socklen_t len = sizeof uc;
	EXPECT(getsockopt(sv[1], SOL_SOCKET, SO_PEERCRED, &uc, &len), 0);
	EXPECT(len, sizeof uc);
	EXPECT_TRUE(uc.pid == getpid() && uc.uid == getuid() && uc.gid == getgid());
	close(sv[0]);
	close(sv[1]);

	SHOW("-- SCM_CREDENTIALS");
	EXPECT(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
	int on = 1;
	EXPECT(setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &on, sizeof on), 0);
	on = 0;
	len = sizeof on;
	EXPECT(getsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &on, &len), 0);
	EXPECT(on, 1);
	for (int explicit = 0; explicit < 2; explicit++) {
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(struct ucred))];
		} c;
		memset(&c, 0, sizeof c);
		struct iovec iov = { "cred", 4 };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
		if (explicit) {
			struct ucred me = { getpid(), getuid(), getgid() };
			m.msg_control = c.b;
			m.msg_controllen = sizeof c.b;
			struct cmsghdr *h = CMSG_FIRSTHDR(&m);
			h->cmsg_level = SOL_SOCKET;
			h->cmsg_type = SCM_CREDENTIALS;
			h->cmsg_len = CMSG_LEN(sizeof me);
			memcpy(CMSG_DATA(h), &me, sizeof me);
		}
		SHOW("explicit %d", explicit);
		EXPECT(sendmsg(sv[0], &m, 0), 4);
		struct iovec riov = { buf, sizeof buf };
		struct msghdr r = { .msg_iov = &riov, .msg_iovlen = 1, .msg_control = c.b,
				    .msg_controllen = sizeof c.b };
		EXPECT(recvmsg(sv[1], &r, 0), 4);
		struct cmsghdr *h = CMSG_FIRSTHDR(&r);
		EXPECT_TRUE(h && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_CREDENTIALS &&
			    h->cmsg_len == CMSG_LEN(sizeof(struct ucred)));
		if (h) {
			memcpy(&uc, CMSG_DATA(h), sizeof uc);
			EXPECT_TRUE(uc.pid == getpid() && uc.uid == getuid() &&
				    uc.gid == getgid());
		}
	}
	close(sv[0]);
	close(sv[1]);
}

static void addresses(void)
{
	struct sockaddr_un a, got;
	socklen_t alen, glen;
	char buf[64];

	SHOW("-- pathname addresses");
	char dir[] = "/tmp/unixsockXXXXXX", path[64], file[64];
	EXPECT_TRUE(mkdtemp(dir) != NULL);
	snprintf(path, sizeof path, "%s/srv", dir);
	snprintf(file, sizeof file, "%s/file", dir);
	int l = EXPECT_OK(socket(AF_UNIX, SOCK_STREAM, 0));
	alen = path_addr(&a, path);
	EXPECT(bind(l, (struct sockaddr *)&a, alen), 0);
	struct stat sb;
	EXPECT(stat(path, &sb), 0);
	EXPECT_TRUE(S_ISSOCK(sb.st_mode));
	glen = sizeof got;
	EXPECT(getsockname(l, (struct sockaddr *)&got, &glen), 0);
	EXPECT(glen, alen);
	EXPECT(strcmp(got.sun_path, path), 0);
	/* Bound but not listening. */
	int c = EXPECT_OK(socket(AF_UNIX, SOCK_STREAM, 0));
	EXPECT_ERR(connect(c, (struct sockaddr *)&a, alen), ECONNREFUSED);
	close(c);
	EXPECT(listen(l, 4), 0);
	int l2 = EXPECT_OK(socket(AF_UNIX, SOCK_STREAM, 0));
	EXPECT_ERR(bind(l2, (struct sockaddr *)&a, alen), EADDRINUSE);
	close(l2);
	c = EXPECT_OK(socket(AF_UNIX, SOCK_STREAM, 0));
	EXPECT(connect(c, (struct sockaddr *)&a, alen), 0);
	EXPECT_TRUE(readable(l) & POLLIN);
	int s = EXPECT_OK(accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC));
	EXPECT(fcntl(s, F_GETFD), FD_CLOEXEC);
	EXPECT_TRUE(fcntl(s, F_GETFL) & O_NONBLOCK);
	glen = sizeof got;
	EXPECT(getpeername(c, (struct sockaddr *)&got, &glen), 0);
	EXPECT(glen, alen);
	/* An unbound client: the peer's name is only the family. */
	glen = sizeof got;
	EXPECT(getpeername(s, (struct sockaddr *)&got, &glen), 0);
	EXPECT(glen, sizeof(sa_family_t));
	struct ucred uc;
	socklen_t ulen = sizeof uc;
	EXPECT(getsockopt(s, SOL_SOCKET, SO_PEERCRED, &uc, &ulen), 0);
	EXPECT_TRUE(uc.pid == getpid());
	EXPECT(send(c, "ping", 4, 0), 4);
	EXPECT(recv(s, buf, sizeof buf, 0), 4);
	close(s);
	close(c);
	close(l);
	/* The socket file outlives the socket: the name stays taken. */
	l = EXPECT_OK(socket(AF_UNIX, SOCK_STREAM, 0));
	EXPECT_ERR(bind(l, (struct sockaddr *)&a, alen), EADDRINUSE);
	c = EXPECT_OK(socket(AF_UNIX, SOCK_STREAM, 0));
	EXPECT_ERR(connect(c, (struct sockaddr *)&a, alen), ECONNREFUSED);
	close(c);
	EXPECT(unlink(path), 0);
	EXPECT(bind(l, (struct sockaddr *)&a, alen), 0);
	close(l);
	EXPECT(unlink(path), 0);
	c = EXPECT_OK(socket(AF_UNIX, SOCK_STREAM, 0));
	EXPECT_ERR(connect(c, (struct sockaddr *)&a, alen), ENOENT);
	int f = EXPECT_OK(open(file, O_CREAT | O_WRONLY, 0600));
	close(f);
	alen = path_addr(&a, file);
	EXPECT_ERR(connect(c, (struct sockaddr *)&a, alen), ECONNREFUSED);
	close(c);
	EXPECT(unlink(file), 0);

	SHOW("-- datagrams between named sockets");
	char dpath[64], cpath[64];
	snprintf(dpath, sizeof dpath, "%s/dgram", dir);
	snprintf(cpath, sizeof cpath, "%s/client", dir);
	int d = EXPECT_OK(socket(AF_UNIX, SOCK_DGRAM, 0));
	alen = path_addr(&a, dpath);
	EXPECT(bind(d, (struct sockaddr *)&a, alen), 0);
	int e = EXPECT_OK(socket(AF_UNIX, SOCK_DGRAM, 0));
	struct sockaddr_un ca;
	socklen_t calen = path_addr(&ca, cpath);
	EXPECT(bind(e, (struct sockaddr *)&ca, calen), 0);
	EXPECT(sendto(e, "to-d", 4, 0, (struct sockaddr *)&a, alen), 4);
	glen = sizeof got;
	EXPECT(recvfrom(d, buf, sizeof buf, 0, (struct sockaddr *)&got, &glen), 4);
	EXPECT(glen, calen);
	EXPECT(strcmp(got.sun_path, cpath), 0);
	EXPECT_ERR(send(e, "x", 1, 0), ENOTCONN);
	/* A pathname of another type: EPROTOTYPE. */
	c = EXPECT_OK(socket(AF_UNIX, SOCK_STREAM, 0));
	EXPECT_ERR(connect(c, (struct sockaddr *)&a, alen), EPROTOTYPE);
	close(c);
	close(d);
	/* The receiver is gone but its file stays. */
	EXPECT_ERR(sendto(e, "x", 1, 0, (struct sockaddr *)&a, alen), ECONNREFUSED);
	close(e);
	unlink(dpath);
	unlink(cpath);
	rmdir(dir);

	SHOW("-- abstract addresses");
	char name[64];
	snprintf(name, sizeof name, "fv-unix-sockets-%08d", (int)getpid());
	alen = abstract_addr(&a, name);
	l = EXPECT_OK(socket(AF_UNIX, SOCK_SEQPACKET, 0));
	EXPECT(bind(l, (struct sockaddr *)&a, alen), 0);
	glen = sizeof got;
	EXPECT(getsockname(l, (struct sockaddr *)&got, &glen), 0);
	EXPECT(glen, alen);
	EXPECT_TRUE(got.sun_path[0] == 0 && memcmp(got.sun_path + 1, name, strlen(name)) == 0);
	l2 = EXPECT_OK(socket(AF_UNIX, SOCK_SEQPACKET, 0));
	EXPECT_ERR(bind(l2, (struct sockaddr *)&a, alen), EADDRINUSE);
	EXPECT(listen(l, 1), 0);
	c = EXPECT_OK(socket(AF_UNIX, SOCK_SEQPACKET, 0));
	EXPECT(connect(c, (struct sockaddr *)&a, alen), 0);
	s = EXPECT_OK(accept(l, NULL, NULL));
	EXPECT(send(c, "one", 3, 0), 3);
	EXPECT(send(c, "two!", 4, 0), 4);
	EXPECT(recv(s, buf, sizeof buf, 0), 3);
	EXPECT(recv(s, buf, sizeof buf, 0), 4);
	close(s);
	close(c);
	close(l);
	/* Closing frees an abstract name at once. */
	EXPECT(bind(l2, (struct sockaddr *)&a, alen), 0);
	close(l2);
	/* Autobind: binding only the family picks an abstract name. */
	d = EXPECT_OK(socket(AF_UNIX, SOCK_DGRAM, 0));
	EXPECT(bind(d, (struct sockaddr *)&a, sizeof(sa_family_t)), 0);
	glen = sizeof got;
	EXPECT(getsockname(d, (struct sockaddr *)&got, &glen), 0);
	EXPECT(glen, offsetof(struct sockaddr_un, sun_path) + 6);
	EXPECT(got.sun_path[0], 0);
	close(d);
	/* No such name. */
	c = EXPECT_OK(socket(AF_UNIX, SOCK_STREAM, 0));
	alen = abstract_addr(&a, "fv-unix-sockets-nobody-here");
	EXPECT_ERR(connect(c, (struct sockaddr *)&a, alen), ECONNREFUSED);
	/* Abstract names are looked up per type: another type's is not found. */
	alen = abstract_addr(&a, name);
	l = EXPECT_OK(socket(AF_UNIX, SOCK_DGRAM, 0));
	EXPECT(bind(l, (struct sockaddr *)&a, alen), 0);
	EXPECT_ERR(connect(c, (struct sockaddr *)&a, alen), ECONNREFUSED);
	close(l);
	close(c);
}

int main(void)
{
	pairs_and_flags();
	rights_and_credentials();
	addresses();
	return t_done();
}
