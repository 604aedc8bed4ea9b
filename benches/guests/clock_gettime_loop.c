/*
 * clock_gettime_loop N: reads CLOCK_MONOTONIC N times through the C
 * library's clock_gettime and prints the loop's duration in nanoseconds.
 *
 * glibc answers from the vDSO named by AT_SYSINFO_EHDR, so natively this is
 * the host kernel's vDSO and in the sandbox the Sentry's, reading its time
 * page without a trap. A sandbox whose vDSO traps shows up as a ratio in
 * the tens.
 */
#include "guest_common.h"

int main(int argc, char **argv)
{
	uint64_t n = parse_iterations(argc, argv);
	uint64_t start, end;
	struct timespec ts;
	/* Read the result, so the calls cannot be optimised out. */
	uint64_t sink = 0;

	start = now_ns();
	for (uint64_t i = 0; i < n; i++) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		sink += (uint64_t)ts.tv_nsec;
	}
	end = now_ns();

	report_ns(start, end);
	return sink == 1; /* practically never; keeps `sink` live */
}
