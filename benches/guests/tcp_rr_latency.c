/*
 * tcp_rr_latency N: listens on 127.0.0.1 and forks; the child connects and
 * echoes every byte it reads until end of file; the parent sends one byte
 * and waits for its echo, N times; prints the duration of the N round trips
 * in nanoseconds.
 *
 * This is the request/response pattern of an RPC or a database client, at
 * its smallest: both ends set TCP_NODELAY (as such programs do) so each byte
 * leaves at once, and a round trip is two sends, two receives and two
 * wake-ups. One untimed round trip runs first, so the connection is
 * established on both sides and the child is known to be in its loop.
 */
#include "tcp_common.h"

/* The child: connects and echoes bytes until the parent closes. */
static void echoer(const struct sockaddr_in *addr)
{
	int fd = connect_loopback(addr);
	char c;

	set_nodelay(fd);
	while (get_byte(fd, &c))
		put_byte(fd, c);
	if (close(fd) != 0) {
		perror("close");
		fail();
	}
	_exit(0);
}

/* One request and its response; fails if the echo is missing or wrong. */
static void round_trip(int fd, char c)
{
	char back;

	put_byte(fd, c);
	if (!get_byte(fd, &back) || back != c) {
		fprintf(stderr, "echo of %#x missing or wrong\n", (unsigned)c);
		fail();
	}
}

int main(int argc, char **argv)
{
	uint64_t n = parse_iterations(argc, argv);
	uint64_t start, end;
	struct sockaddr_in addr;
	int listener = listen_loopback(&addr);
	int conn;
	pid_t pid = fork_or_exit();

	if (pid == 0) {
		close(listener);
		echoer(&addr);
	}
	conn = accept_one(listener);
	set_nodelay(conn);
	round_trip(conn, 'w');

	start = now_ns();
	for (uint64_t i = 0; i < n; i++)
		round_trip(conn, (char)('a' + i % 26));
	end = now_ns();

	if (close(conn) != 0) {
		perror("close");
		return 1;
	}
	reap_ok(pid, "echoer");
	report_ns(start, end);
	return 0;
}
