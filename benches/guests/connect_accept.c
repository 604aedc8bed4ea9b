/*
 * connect_accept N: listens on 127.0.0.1 and forks; the child makes N + 1
 * connections one after the other, each time connecting, waiting for the
 * parent's close (end of file) and closing its end; the parent accepts each
 * and closes it at once. Prints, in nanoseconds, the time from the end of
 * the first round (its accept and close) to the end of the last, which
 * spans N whole rounds.
 *
 * A round is what a short-lived HTTP/1.0 exchange costs minus the data: a
 * socket, the three-way handshake, accept, and both closes with their FINs.
 * The child waits for end of file before connecting again, so there is
 * never more than one connection and the backlog never hides the cost. The
 * first round is left out of the time: it also covers the fork.
 */
#include "tcp_common.h"

/* The child: `rounds` times connect, wait for the server's close, close. */
static void client(const struct sockaddr_in *addr, uint64_t rounds)
{
	for (uint64_t i = 0; i < rounds; i++) {
		int fd = connect_loopback(addr);
		char c;

		if (get_byte(fd, &c)) {
			fprintf(stderr, "client: data instead of end of file\n");
			fail();
		}
		if (close(fd) != 0) {
			perror("close");
			fail();
		}
	}
	_exit(0);
}

/* Accepts one connection and closes it. */
static void accept_close(int listener)
{
	if (close(accept_one(listener)) != 0) {
		perror("close");
		fail();
	}
}

int main(int argc, char **argv)
{
	uint64_t n = parse_iterations(argc, argv);
	uint64_t start, end;
	struct sockaddr_in addr;
	int listener = listen_loopback(&addr);
	pid_t pid = fork_or_exit();

	if (pid == 0) {
		close(listener);
		client(&addr, n + 1);
	}
	accept_close(listener);

	start = now_ns();
	for (uint64_t i = 0; i < n; i++)
		accept_close(listener);
	end = now_ns();

	reap_ok(pid, "client");
	report_ns(start, end);
	return 0;
}
