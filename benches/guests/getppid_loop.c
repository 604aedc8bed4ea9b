/*
 * getppid_loop N: makes N raw getppid system calls and prints the loop's
 * duration in nanoseconds.
 *
 * getppid is about the cheapest call there is (no arguments, no memory
 * touched), so the time per call is the platform's round trip: trap, hand
 * over to the Sentry, dispatch, return. It goes through syscall(2) so no libc
 * can answer it from a cache.
 */
#include <sys/syscall.h>
#include <unistd.h>

#include "guest_common.h"

int main(int argc, char **argv)
{
	uint64_t n = parse_iterations(argc, argv);
	uint64_t start, end;

	start = now_ns();
	for (uint64_t i = 0; i < n; i++)
		syscall(SYS_getppid);
	end = now_ns();

	report_ns(start, end);
	return 0;
}
