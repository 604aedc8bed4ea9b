/* /proc's system-wide files (issue 4 point 3): vmstat, diskstats, stat's
 * CPU line, loadavg, version and
 * filesystems in Linux's formats, /proc/sys/kernel/{osrelease,ostype,
 * hostname,pid_max,random/uuid,random/boot_id} and the /proc/sys/vm files
 * programs read (allocators, databases, the JVM). Values differ between
 * runs, so only their formats and agreements are printed. */
#include "t.h"
#include <ctype.h>
#include <dirent.h>
#include <sys/utsname.h>

static char buf[65536];

static long slurp(const char *path)
{
	long n = t_slurp(path, buf, sizeof buf);
	if (n < 0)
		SHOW("%s: errno=%s", path, errname(errno));
	return n;
}

/* "8-4-4-4-12" lowercase hex digits and a newline; a random (version 4)
 * UUID with the RFC 4122 variant. */
static int uuid_ok(const char *s)
{
	for (int i = 0; i < 36; i++) {
		int dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (dash ? s[i] != '-' : !(isdigit(s[i]) || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	}
	return s[36] == '\n' && s[37] == 0 && s[14] == '4' && strchr("89ab", s[19]);
}

/* One decimal number (optionally negative) and a newline. */
static int number_ok(const char *s, long lo, long hi)
{
	char *end;
	long v = strtol(s, &end, 10);
	return end != s && !strcmp(end, "\n") && v >= lo && v <= hi;
}

int main(void)
{
	struct utsname u;
	EXPECT(uname(&u), 0);

	/* vmstat: "key value" lines with the counters vmstat(8) reads;
	 * diskstats readable (empty without block devices). */
	EXPECT_TRUE(slurp("/proc/vmstat") > 0);
	EXPECT_TRUE(!strncmp(buf, "nr_free_pages ", 14) && strstr(buf, "\npgfault ") &&
		    strstr(buf, "\npswpin ") && strstr(buf, "\npgmajfault "));
	EXPECT_TRUE(slurp("/proc/diskstats") >= 0);
	/* stat: the first line is "cpu " and ten tick counts whose sum grows
	 * with time (on a busy host the idle count alone may not: it never
	 * falls). */
	unsigned long long t[10], sum0 = 0, idle0 = 0, sum1 = 0;
	EXPECT_TRUE(slurp("/proc/stat") > 0 &&
		    sscanf(buf, "cpu  %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &t[0], &t[1],
			   &t[2], &t[3], &t[4], &t[5], &t[6], &t[7], &t[8], &t[9]) == 10);
	for (int i = 0; i < 10; i++)
		sum0 += t[i];
	idle0 = t[3];
	usleep(300000);
	EXPECT_TRUE(slurp("/proc/stat") > 0 &&
		    sscanf(buf, "cpu  %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &t[0], &t[1],
			   &t[2], &t[3], &t[4], &t[5], &t[6], &t[7], &t[8], &t[9]) == 10);
	for (int i = 0; i < 10; i++)
		sum1 += t[i];
	EXPECT_TRUE(sum1 > sum0 && t[3] >= idle0);

	/* loadavg: "L1 L5 L15 RUNNING/TOTAL LAST_PID". */
	EXPECT_TRUE(slurp("/proc/loadavg") > 0);
	float l1, l5, l15;
	int running, total, last, used = 0;
	EXPECT(sscanf(buf, "%f %f %f %d/%d %d%n", &l1, &l5, &l15, &running, &total, &last, &used),
	       6);
	EXPECT_TRUE(l1 >= 0 && l5 >= 0 && l15 >= 0);
	EXPECT_TRUE(running >= 1 && running <= total);
	EXPECT_TRUE(last > 0);
	EXPECT_TRUE(!strcmp(buf + used, "\n"));

	/* version: "Linux version RELEASE (...) ...", the release uname
	 * gives. */
	EXPECT_TRUE(slurp("/proc/version") > 0);
	char prefix[512];
	snprintf(prefix, sizeof prefix, "Linux version %s ", u.release);
	EXPECT_TRUE(!strncmp(buf, prefix, strlen(prefix)));
	EXPECT_TRUE(buf[strlen(buf) - 1] == '\n');

	/* filesystems: "nodev\tNAME" or "\tNAME" per line; proc and tmpfs
	 * among them, both without a device. */
	EXPECT_TRUE(slurp("/proc/filesystems") > 0);
	int lines = 0, bad = 0, proc = 0, tmpfs = 0;
	for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n")) {
		lines++;
		const char *name = !strncmp(l, "nodev\t", 6) ? l + 6 : l[0] == '\t' ? l + 1 : NULL;
		if (!name || !*name || strchr(name, '\t') || strchr(name, ' '))
			bad++;
		proc |= !strcmp(l, "nodev\tproc");
		tmpfs |= !strcmp(l, "nodev\ttmpfs");
	}
	EXPECT_TRUE(lines > 2);
	EXPECT(bad, 0);
	EXPECT_TRUE(proc && tmpfs);

	/* kernel/: what uname says, and Linux's constants. */
	EXPECT_TRUE(slurp("/proc/sys/kernel/ostype") > 0);
	SHOW("ostype: %s", strtok(buf, "\n"));
	EXPECT_TRUE(slurp("/proc/sys/kernel/osrelease") > 0);
	char want[512];
	snprintf(want, sizeof want, "%s\n", u.release);
	EXPECT_TRUE(!strcmp(buf, want));
	EXPECT_TRUE(slurp("/proc/sys/kernel/hostname") > 0);
	snprintf(want, sizeof want, "%s\n", u.nodename);
	EXPECT_TRUE(!strcmp(buf, want));
	EXPECT_TRUE(slurp("/proc/sys/kernel/pid_max") > 0);
	EXPECT_TRUE(number_ok(buf, 301, 4194304));
	EXPECT_TRUE(strtol(buf, NULL, 10) > getpid());

	/* random/uuid: a new random UUID at every read; boot_id: one that
	 * stays the same. */
	char u1[64], u2[64], b1[64], b2[64];
	EXPECT(slurp("/proc/sys/kernel/random/uuid"), 37);
	snprintf(u1, sizeof u1, "%.63s", buf);
	EXPECT(slurp("/proc/sys/kernel/random/uuid"), 37);
	snprintf(u2, sizeof u2, "%.63s", buf);
	EXPECT_TRUE(uuid_ok(u1) && uuid_ok(u2));
	EXPECT_TRUE(strcmp(u1, u2) != 0);
	EXPECT(slurp("/proc/sys/kernel/random/boot_id"), 37);
	snprintf(b1, sizeof b1, "%.63s", buf);
	EXPECT(slurp("/proc/sys/kernel/random/boot_id"), 37);
	snprintf(b2, sizeof b2, "%.63s", buf);
	EXPECT_TRUE(uuid_ok(b1));
	EXPECT_TRUE(!strcmp(b1, b2));
	EXPECT_TRUE(strcmp(b1, u1) && strcmp(b1, u2));
	/* The same boot id in another process. */
	int p[2];
	EXPECT(pipe(p), 0);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		long n = t_slurp("/proc/sys/kernel/random/boot_id", buf, sizeof buf);
		write(p[1], buf, n > 0 ? n : 0);
		_exit(0);
	}
	close(p[1]);
	memset(buf, 0, 64);
	EXPECT(read(p[0], buf, 63), 37);
	EXPECT_TRUE(!strcmp(buf, b1));
	EXPECT_TRUE(waitpid(pid, NULL, 0) == pid);

	/* vm/: the memory policy files that allocators (jemalloc, Redis),
	 * databases and the JVM read: numbers in their ranges. */
	EXPECT_TRUE(slurp("/proc/sys/vm/overcommit_memory") > 0);
	EXPECT_TRUE(number_ok(buf, 0, 2));
	EXPECT_TRUE(slurp("/proc/sys/vm/overcommit_ratio") > 0);
	EXPECT_TRUE(number_ok(buf, 0, 100));
	EXPECT_TRUE(slurp("/proc/sys/vm/max_map_count") > 0);
	EXPECT_TRUE(number_ok(buf, 1, INT_MAX));
	EXPECT_TRUE(slurp("/proc/sys/vm/mmap_min_addr") > 0);
	EXPECT_TRUE(number_ok(buf, 0, 1 << 20));
	EXPECT_TRUE(slurp("/proc/sys/vm/swappiness") > 0);
	EXPECT_TRUE(number_ok(buf, 0, 200));
	/* They are listed too. */
	DIR *d = opendir("/proc/sys/vm");
	int seen = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		seen += !strcmp(e->d_name, "overcommit_memory") ||
			!strcmp(e->d_name, "max_map_count") ||
			!strcmp(e->d_name, "overcommit_ratio");
	EXPECT(seen, 3);
	if (d)
		closedir(d);
	return t_done();
}
