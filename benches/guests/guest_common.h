/*
 * Shared by the benchmark guests: argument parsing and the monotonic clock.
 *
 * Each guest times only its own loop and prints the loop's duration in
 * nanoseconds on stdout, so process start-up (which differs wildly between
 * native and sandboxed runs) stays out of the per-call numbers.
 */
#ifndef GUEST_COMMON_H
#define GUEST_COMMON_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
		perror("clock_gettime");
		exit(1);
	}
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Parses argv[1] as the iteration count; exits with a usage line if absent. */
static inline uint64_t parse_iterations(int argc, char **argv)
{
	char *end;
	unsigned long long n;

	if (argc < 2) {
		fprintf(stderr, "usage: %s ITERATIONS [...]\n", argv[0]);
		exit(2);
	}
	errno = 0;
	n = strtoull(argv[1], &end, 10);
	if (errno != 0 || *end != '\0' || end == argv[1]) {
		fprintf(stderr, "%s: bad iteration count '%s'\n", argv[0], argv[1]);
		exit(2);
	}
	return (uint64_t)n;
}

static inline void report_ns(uint64_t start, uint64_t end)
{
	printf("%llu\n", (unsigned long long)(end - start));
}

#endif
