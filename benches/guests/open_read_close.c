/*
 * open_read_close N [PATH]: N times opens PATH (default /etc/os-release),
 * reads up to 4 KiB from it and closes it; prints the loop's duration in
 * nanoseconds.
 *
 * This is the common small-file pattern (config files, package metadata):
 * path resolution, a file description, one read through the page cache.
 * /etc/os-release is usually a symlink into /usr/lib, so resolution follows
 * a link as well.
 */
#include <fcntl.h>
#include <unistd.h>

#include "guest_common.h"

int main(int argc, char **argv)
{
	uint64_t n = parse_iterations(argc, argv);
	const char *path = argc > 2 ? argv[2] : "/etc/os-release";
	static char buf[4096];
	uint64_t start, end;

	start = now_ns();
	for (uint64_t i = 0; i < n; i++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		if (fd < 0) {
			perror(path);
			return 1;
		}
		if (read(fd, buf, sizeof(buf)) < 0) {
			perror("read");
			return 1;
		}
		if (close(fd) != 0) {
			perror("close");
			return 1;
		}
	}
	end = now_ns();

	report_ns(start, end);
	return 0;
}
