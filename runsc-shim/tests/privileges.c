/* Prints the capabilities, no_new_privs and RLIMIT_NOFILE/RLIMIT_RTPRIO
 * limits of the calling process as each interface shows them: capget,
 * PR_CAPBSET_READ, PR_CAP_AMBIENT_IS_SET, PR_GET_NO_NEW_PRIVS,
 * getrlimit/prlimit, and the lines of /proc/self/status and
 * /proc/self/limits. */
#define _GNU_SOURCE
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static void lines(const char *path, const char *const *prefixes)
{
	char line[512];
	FILE *f = fopen(path, "r");
	if (!f) {
		printf("%s: cannot open\n", path);
		return;
	}
	while (fgets(line, sizeof line, f))
		for (const char *const *p = prefixes; *p; p++)
			if (!strncmp(line, *p, strlen(*p)))
				fputs(line, stdout);
	fclose(f);
}

int main(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof d);
	if (syscall(SYS_capget, &h, d) != 0) {
		printf("capget failed\n");
	} else {
#define SET(f) ((unsigned long long)d[1].f << 32 | d[0].f)
		printf("capget effective=%016llx permitted=%016llx inheritable=%016llx\n",
		       SET(effective), SET(permitted), SET(inheritable));
	}
	unsigned long long bounding = 0, ambient = 0;
	for (int cap = 0; cap < 64; cap++) {
		int b = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
		int a = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0);
		if (b < 0)
			break;
		if (b)
			bounding |= 1ULL << cap;
		if (a > 0)
			ambient |= 1ULL << cap;
	}
	printf("prctl bounding=%016llx ambient=%016llx no_new_privs=%d\n", bounding,
	       ambient, prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
	struct rlimit r, p;
	getrlimit(RLIMIT_NOFILE, &r);
	prlimit(0, RLIMIT_NOFILE, NULL, &p);
	printf("nofile getrlimit=%llu/%llu prlimit=%llu/%llu\n", (unsigned long long)r.rlim_cur,
	       (unsigned long long)r.rlim_max, (unsigned long long)p.rlim_cur,
	       (unsigned long long)p.rlim_max);
	getrlimit(RLIMIT_RTPRIO, &r);
	printf("rtprio getrlimit=%llu/%llu\n", (unsigned long long)r.rlim_cur,
	       (unsigned long long)r.rlim_max);
	static const char *const status[] = { "Cap", "NoNewPrivs:", NULL };
	static const char *const limits[] = { "Max open files", "Max realtime priority", NULL };
	lines("/proc/self/status", status);
	lines("/proc/self/limits", limits);
	return 0;
}
