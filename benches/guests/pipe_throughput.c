/*
 * pipe_throughput N: forks; the child writes N MiB into a pipe in 64 KiB
 * writes, the parent reads them in 64 KiB reads and discards them; prints
 * the duration of the transfer in nanoseconds.
 *
 * 64 KiB is Linux's default pipe capacity (pipe(7)), so each write can fill
 * the pipe and each read drain it: the time is the platform's per-call cost
 * (two calls and at least one wake-up per 64 KiB) plus the copies in and
 * out. The clock starts in the parent just before it sends the child a go
 * byte on a second pipe, so neither the fork nor data written before the
 * start is counted, and stops at end of file, before the child is reaped.
 */
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest_common.h"

#define CHUNK (64 * 1024)
#define MIB (1024 * 1024)

static char buf[CHUNK];

/* The child: waits for the go byte, then writes `bytes` into `fd`. */
static void writer(int go_fd, int fd, uint64_t bytes)
{
	char go;

	if (read(go_fd, &go, 1) != 1) {
		perror("read go byte");
		_exit(1);
	}
	/* Not zeros, so no layer can take a short cut for zero pages. */
	memset(buf, 0x5a, sizeof(buf));
	while (bytes > 0) {
		size_t len = bytes < CHUNK ? (size_t)bytes : CHUNK;
		ssize_t written = write(fd, buf, len);

		if (written <= 0) {
			perror("write");
			_exit(1);
		}
		bytes -= (uint64_t)written;
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	uint64_t n = parse_iterations(argc, argv);
	uint64_t expected = n * MIB, total = 0;
	uint64_t start, end;
	int data[2], go[2], status;
	pid_t pid;

	if (pipe(data) != 0 || pipe(go) != 0) {
		perror("pipe");
		return 1;
	}
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		close(data[0]);
		close(go[1]);
		writer(go[0], data[1], expected);
	}
	/* Our copy of the write end must go, or the read never sees EOF. */
	close(data[1]);
	close(go[0]);

	start = now_ns();
	if (write(go[1], "g", 1) != 1) {
		perror("write go byte");
		return 1;
	}
	for (;;) {
		ssize_t got = read(data[0], buf, sizeof(buf));

		if (got < 0) {
			perror("read");
			return 1;
		}
		if (got == 0)
			break;
		total += (uint64_t)got;
	}
	end = now_ns();

	if (wait4(pid, &status, 0, NULL) != pid) {
		perror("wait4");
		return 1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "writer ended with status %#x\n", status);
		return 1;
	}
	if (total != expected) {
		fprintf(stderr, "read %llu bytes, expected %llu\n",
			(unsigned long long)total, (unsigned long long)expected);
		return 1;
	}

	report_ns(start, end);
	return 0;
}
