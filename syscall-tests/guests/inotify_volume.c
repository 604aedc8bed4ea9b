/* inotify in a directory of argv[1] (in the sandbox a volume, a host
 * directory mounted into it): the checks of inotify.c, whose events the
 * host reports there. Each change the program makes must be reported
 * once, as Linux reports it, not once by the Sentry and again by the host. */
#define INOTIFY_CHECKS_ONLY
#include "inotify.c"

int main(int argc, char **argv)
{
	if (argc < 2) {
		printf("usage: inotify_volume DIR\n");
		return 2;
	}
	char d[4096];
	snprintf(d, sizeof d, "%s/inotify-XXXXXX", argv[1]);
	if (!mkdtemp(d))
		return 99;
	return inotify_checks(d);
}
