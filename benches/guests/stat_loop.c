/*
 * stat_loop N [PATH]: N times stat()s PATH (default /usr/bin/env); prints
 * the loop's duration in nanoseconds.
 *
 * Path resolution and attributes without opening anything: what `make`,
 * `git status` and module loaders do most. Repeated lookups of the same
 * path should be answered from the Sentry's dentry cache, not the gofer.
 */
#include <sys/stat.h>

#include "guest_common.h"

int main(int argc, char **argv)
{
	uint64_t n = parse_iterations(argc, argv);
	const char *path = argc > 2 ? argv[2] : "/usr/bin/env";
	struct stat st;
	uint64_t start, end;

	start = now_ns();
	for (uint64_t i = 0; i < n; i++) {
		if (stat(path, &st) != 0) {
			perror(path);
			return 1;
		}
	}
	end = now_ns();

	report_ns(start, end);
	return 0;
}
