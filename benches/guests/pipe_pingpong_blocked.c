/*
 * pipe_pingpong_blocked N [T]: starts T threads (200 by default), each
 * blocked in read() on a pipe of its own that nobody writes to, then
 * ping-pongs one byte N times between the main thread and one more thread
 * over a second pair of pipes; prints the duration of the N round trips in
 * nanoseconds.
 *
 * A round trip is two writes, two reads and two wake-ups, as in
 * pipe_throughput's hand-over, but here with a crowd of sleepers that none
 * of those writes concerns: a kernel that wakes only the waiters of the
 * pipe written to does the same work whatever T is, one that wakes every
 * blocked thread to re-check pays T wake-ups a write. The sleepers are all
 * started and counted in before the clock starts, and a hundred untimed
 * round trips let the last of them reach read().
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "guest_common.h"

#define DEFAULT_SLEEPERS 200
#define MAX_SLEEPERS 4096
#define WARM_UP 100

static atomic_int started;

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* A sleeper: blocks in read() until main writes its one byte at the end. */
static void *sleeper(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char c;

	atomic_fetch_add(&started, 1);
	if (read(fd, &c, 1) != 1)
		die("sleeper read");
	return NULL;
}

struct pair {
	int ping; /* read end: main's bytes */
	int pong; /* write end: the echoes */
};

/* The partner: echoes every byte until end of file. */
static void *echoer(void *arg)
{
	struct pair *p = arg;
	char c;

	for (;;) {
		ssize_t n = read(p->ping, &c, 1);

		if (n == 0)
			return NULL;
		if (n != 1)
			die("echo read");
		if (write(p->pong, &c, 1) != 1)
			die("echo write");
	}
}

static void round_trip(int out, int in, char c)
{
	char back;

	if (write(out, &c, 1) != 1)
		die("ping write");
	if (read(in, &back, 1) != 1 || back != c) {
		fprintf(stderr, "echo of %#x missing or wrong\n", (unsigned)c);
		exit(1);
	}
}

static int sleepers_arg(int argc, char **argv)
{
	long t;

	if (argc < 3)
		return DEFAULT_SLEEPERS;
	t = strtol(argv[2], NULL, 10);
	if (t < 0 || t > MAX_SLEEPERS) {
		fprintf(stderr, "%s: bad thread count '%s'\n", argv[0], argv[2]);
		exit(2);
	}
	return (int)t;
}

int main(int argc, char **argv)
{
	uint64_t n = parse_iterations(argc, argv);
	int t = sleepers_arg(argc, argv);
	static int fds[MAX_SLEEPERS][2];
	static pthread_t threads[MAX_SLEEPERS];
	int ping[2], pong[2];
	struct pair pair;
	pthread_attr_t attr;
	pthread_t partner;
	uint64_t start, end, i;
	struct timespec pause = { 0, 20 * 1000 * 1000 };

	/* Small stacks: the sleepers only ever call read(). */
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	for (int k = 0; k < t; k++) {
		if (pipe(fds[k]) != 0)
			die("pipe");
		if (pthread_create(&threads[k], &attr, sleeper, (void *)(intptr_t)fds[k][0]) != 0)
			die("pthread_create");
	}
	while (atomic_load(&started) < t)
		nanosleep(&pause, NULL);
	nanosleep(&pause, NULL);

	if (pipe(ping) != 0 || pipe(pong) != 0)
		die("pipe");
	pair.ping = ping[0];
	pair.pong = pong[1];
	if (pthread_create(&partner, &attr, echoer, &pair) != 0)
		die("pthread_create");
	for (i = 0; i < WARM_UP; i++)
		round_trip(ping[1], pong[0], 'w');

	start = now_ns();
	for (i = 0; i < n; i++)
		round_trip(ping[1], pong[0], (char)i);
	end = now_ns();

	close(ping[1]);
	if (pthread_join(partner, NULL) != 0)
		die("pthread_join");
	for (int k = 0; k < t; k++) {
		if (write(fds[k][1], "x", 1) != 1)
			die("sleeper write");
		if (pthread_join(threads[k], NULL) != 0)
			die("pthread_join");
	}

	report_ns(start, end);
	return 0;
}
