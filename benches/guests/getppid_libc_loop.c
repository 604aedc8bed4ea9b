/*
 * getppid_libc_loop N: makes N getppid calls through the C library's own
 * wrapper and prints the loop's duration in nanoseconds.
 *
 * glibc's getppid is a `mov $110, %eax; syscall` site: the kind a sandbox
 * may patch into a cheaper entry (ferrovisor's seccomp platforms and
 * gVisor's systrap both do), unlike the generic syscall(2) of
 * getppid_loop.c.
 */
#include <unistd.h>

#include "guest_common.h"

int main(int argc, char **argv)
{
	uint64_t n = parse_iterations(argc, argv);
	uint64_t start, end;
	volatile pid_t sink = 0;

	start = now_ns();
	for (uint64_t i = 0; i < n; i++)
		sink += getppid();
	end = now_ns();

	(void)sink;
	report_ns(start, end);
	return 0;
}
