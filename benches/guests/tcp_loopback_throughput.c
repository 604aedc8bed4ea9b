/*
 * tcp_loopback_throughput N: listens on 127.0.0.1 and forks; the child
 * connects and writes N MiB in 64 KiB writes, the parent accepts, reads in
 * 64 KiB reads and discards; prints the duration of the transfer in
 * nanoseconds.
 *
 * As in pipe_throughput, the clock starts in the parent just before it sends
 * the child a go byte (here on the connection itself, once accepted), so the
 * fork and the handshake are not counted, and stops at end of file, before
 * the child is reaped. 64 KiB writes are what cat, nc and most copying loops
 * use; the rest (segment size, buffers, window) is the stack's own.
 */
#include <string.h>

#include "tcp_common.h"

#define CHUNK (64 * 1024)
#define MIB (1024 * 1024)

static char buf[CHUNK];

/* The child: connects, waits for the go byte, writes `bytes`, closes. */
static void writer(const struct sockaddr_in *addr, uint64_t bytes)
{
	int fd = connect_loopback(addr);
	char go;

	if (!get_byte(fd, &go)) {
		fprintf(stderr, "writer: connection closed before the go byte\n");
		fail();
	}
	/* Not zeros, so no layer can take a short cut for zero pages. */
	memset(buf, 0x5a, sizeof(buf));
	while (bytes > 0) {
		size_t len = bytes < CHUNK ? (size_t)bytes : CHUNK;
		ssize_t written = write(fd, buf, len);

		if (written <= 0) {
			perror("write");
			fail();
		}
		bytes -= (uint64_t)written;
	}
	if (close(fd) != 0) {
		perror("close");
		fail();
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	uint64_t n = parse_iterations(argc, argv);
	uint64_t expected = n * MIB, total = 0;
	uint64_t start, end;
	struct sockaddr_in addr;
	int listener = listen_loopback(&addr);
	int conn;
	pid_t pid = fork_or_exit();

	if (pid == 0) {
		close(listener);
		writer(&addr, expected);
	}
	conn = accept_one(listener);

	start = now_ns();
	put_byte(conn, 'g');
	for (;;) {
		ssize_t got = read(conn, buf, sizeof(buf));

		if (got < 0) {
			perror("read");
			return 1;
		}
		if (got == 0)
			break;
		total += (uint64_t)got;
	}
	end = now_ns();

	reap_ok(pid, "writer");
	if (total != expected) {
		fprintf(stderr, "read %llu bytes, expected %llu\n",
			(unsigned long long)total, (unsigned long long)expected);
		return 1;
	}
	report_ns(start, end);
	return 0;
}
