/*
 * readdir N [DIR]: N times opens DIR (default /usr/bin, about a thousand
 * entries on a Debian host), reads every entry and closes it; prints the
 * loop's duration in nanoseconds.
 *
 * A directory listing as `ls`, `find` and shells' globbing make it: one
 * open, getdents64 until the end, one close.
 */
#include <dirent.h>

#include "guest_common.h"

int main(int argc, char **argv)
{
	uint64_t n = parse_iterations(argc, argv);
	const char *path = argc > 2 ? argv[2] : "/usr/bin";
	uint64_t start, end, entries = 0;

	start = now_ns();
	for (uint64_t i = 0; i < n; i++) {
		DIR *d = opendir(path);

		if (!d) {
			perror(path);
			return 1;
		}
		while (readdir(d))
			entries++;
		closedir(d);
	}
	end = now_ns();

	if (entries < n) {
		fprintf(stderr, "%s: empty\n", path);
		return 1;
	}
	report_ns(start, end);
	return 0;
}
