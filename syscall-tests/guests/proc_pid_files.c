/* /proc/[pid] files not covered elsewhere (issue 4 point 3): statm, maps
 * and smaps (a mapping the guest made, with its permissions, offset and
 * path), environ, cwd, limits (as getrlimit answers), oom_score_adj, and
 * /proc/thread-self. Values that differ between runs are reduced to facts. */
#include "t.h"
#include <pthread.h>
#include <sys/resource.h>

static char text[1 << 20];

/* The maps (or smaps) line of the mapping that holds ADDR: its range,
 * permissions, offset and path; for smaps also the Size: that follows. */
struct region {
	unsigned long start, end, off;
	char perms[5], path[512];
	long size_kb, rss_kb;
};

static int find_region(const char *file, unsigned long addr, struct region *r)
{
	if (t_slurp(file, text, sizeof text) < 0)
		return 0;
	int found = 0;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		unsigned long s, e, off;
		char perms[5];
		int name = 0;
		if (sscanf(line, "%lx-%lx %4s %lx %*s %*s%n", &s, &e, perms, &off, &name) == 4 &&
		    name > 0) {
			if (found)
				return 1; /* the next mapping's line */
			if (addr >= s && addr < e) {
				found = 1;
				r->start = s;
				r->end = e;
				r->off = off;
				memcpy(r->perms, perms, 5);
				const char *p = line + name;
				while (*p == ' ')
					p++;
				snprintf(r->path, sizeof r->path, "%s", p);
				r->size_kb = r->rss_kb = -1;
			}
			continue;
		}
		if (found && sscanf(line, "Size: %ld kB", &r->size_kb) == 1)
			continue;
		if (found && sscanf(line, "Rss: %ld kB", &r->rss_kb) == 1)
			return 1;
	}
	return found;
}

static void statm(long v[7])
{
	memset(v, 0xff, 7 * sizeof *v);
	if (t_slurp("/proc/self/statm", text, sizeof text) < 0 ||
	    sscanf(text, "%ld %ld %ld %ld %ld %ld %ld", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
		   &v[6]) != 7)
		v[0] = -1;
}

/* The limits rows in Linux's order, with the resource each shows. */
static const struct {
	const char *name;
	int res;
} rows[] = {
	{ "Max cpu time", RLIMIT_CPU },
	{ "Max file size", RLIMIT_FSIZE },
	{ "Max data size", RLIMIT_DATA },
	{ "Max stack size", RLIMIT_STACK },
	{ "Max core file size", RLIMIT_CORE },
	{ "Max resident set", RLIMIT_RSS },
	{ "Max processes", RLIMIT_NPROC },
	{ "Max open files", RLIMIT_NOFILE },
	{ "Max locked memory", RLIMIT_MEMLOCK },
	{ "Max address space", RLIMIT_AS },
	{ "Max file locks", RLIMIT_LOCKS },
	{ "Max pending signals", RLIMIT_SIGPENDING },
	{ "Max msgqueue size", RLIMIT_MSGQUEUE },
	{ "Max nice priority", RLIMIT_NICE },
	{ "Max realtime priority", RLIMIT_RTPRIO },
	{ "Max realtime timeout", RLIMIT_RTTIME },
};

static int limit_matches(const char *field, rlim_t want)
{
	if (want == RLIM_INFINITY)
		return !strcmp(field, "unlimited");
	char num[32];
	snprintf(num, sizeof num, "%llu", (unsigned long long)want);
	return !strcmp(field, num);
}

/* Every row of /proc/self/limits agrees with getrlimit; prints the rows'
 * names and units, which are the same everywhere. */
static void check_limits(int show)
{
	char *lines[32];
	int n = 0;
	EXPECT_TRUE(t_slurp("/proc/self/limits", text, sizeof text) > 0);
	for (char *l = strtok(text, "\n"); l && n < 32; l = strtok(NULL, "\n"))
		lines[n++] = l;
	if (show)
		SHOW("limits header: [%s]", n ? lines[0] : "");
	EXPECT(n, 17);
	for (int i = 0; i < 16 && i + 1 < n; i++) {
		char *l = lines[i + 1];
		char soft[32] = "", hard[32] = "", units[16] = "";
		int named = !strncmp(l, rows[i].name, strlen(rows[i].name)) && strlen(l) >= 26;
		if (named)
			sscanf(l + 26, "%31s %31s %15s", soft, hard, units);
		struct rlimit r;
		getrlimit(rows[i].res, &r);
		int ok = named && limit_matches(soft, r.rlim_cur) && limit_matches(hard, r.rlim_max);
		if (show)
			SHOW("limits row %d: %s [%s]", i, rows[i].name, units);
		if (!ok) {
			SHOW("  row %d: %s", i, l);
			t_fail("a row matching getrlimit");
		}
	}
}

static void *thread_self(void *arg)
{
	char buf[64], want[64];
	ssize_t n = readlink("/proc/thread-self", buf, sizeof buf - 1);
	buf[n < 0 ? 0 : n] = 0;
	snprintf(want, sizeof want, "%d/task/%ld", getpid(), (long)syscall(SYS_gettid));
	*(int *)arg = !strcmp(buf, want) && syscall(SYS_gettid) != getpid();
	return NULL;
}

static long read_long(const char *path)
{
	char buf[64];
	if (t_slurp(path, buf, sizeof buf) < 0)
		return -99999;
	return strtol(buf, NULL, 10);
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	int r = write(fd, s, strlen(s));
	int e = errno;
	close(fd);
	errno = e;
	return r;
}

/* Reads `fd` from offset 0 (by lseek, or by pread) and says which of
 * the umasks `a`, `b` its Umask line shows. */
static const char *umask_seen(int fd, int use_pread)
{
	char buf[4096];
	long n = use_pread ? pread(fd, buf, sizeof buf - 1, 0)
			   : (lseek(fd, 0, SEEK_SET), read(fd, buf, sizeof buf - 1));
	buf[n > 0 ? n : 0] = 0;
	const char *u = strstr(buf, "Umask:\t");
	if (!u)
		return "none";
	if (!strncmp(u + 7, "0022", 4))
		return "0022";
	if (!strncmp(u + 7, "0077", 4))
		return "0077";
	if (!strncmp(u + 7, "0027", 4))
		return "0027";
	return "other";
}

/* A /proc file read again from offset 0 shows the state as it is then, as
 * Linux's seq_file makes it anew; a read that goes on from where it was
 * finishes the copy it began. */
static void read_again(void)
{
	mode_t old = umask(022);
	int fd = open("/proc/self/status", O_RDONLY);
	EXPECT_TRUE(fd >= 0);
	SHOW("first read: %s", umask_seen(fd, 0));
	umask(077);
	SHOW("after lseek to 0: %s", umask_seen(fd, 0));
	umask(027);
	SHOW("pread at 0: %s", umask_seen(fd, 1));
	close(fd);
	umask(old);
}

int main(int argc, char **argv)
{
	char buf[4096];
	if (argc > 1 && !strcmp(argv[1], "environ")) {
		/* Run by execve below with an environment of our choosing. */
		long n = t_slurp("/proc/self/environ", buf, sizeof buf);
		for (long i = 0; i < n; i++)
			if (!buf[i])
				buf[i] = '|';
		SHOW("child's /proc/self/environ: %s", n >= 0 ? buf : "(unreadable)");
		return 0;
	}
	read_again();

	/* statm: seven numbers, resident within the size; an untouched
	 * mapping of 64 MiB adds to the size. */
	long before[7], after[7];
	statm(before);
	EXPECT_TRUE(before[0] > 0);
	EXPECT_TRUE(before[1] >= 0 && before[1] <= before[0]);
	EXPECT_TRUE(before[2] >= 0 && before[2] <= before[1]);
	char *big = EXPECT_MAP(mmap(NULL, 64 << 20, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	statm(after);
	EXPECT_TRUE(after[0] - before[0] >= (64 << 20) / 4096);
	EXPECT(munmap(big, 64 << 20), 0);
	statm(after);
	EXPECT_TRUE(after[0] < before[0] + (64 << 20) / 4096);

	/* maps and smaps: a file mapping at offset 4096, read-only. */
	int fd = EXPECT(open(FIX("big.bin"), O_RDONLY), 3);
	char *f = EXPECT_MAP(mmap(NULL, 2 * 4096, PROT_READ, MAP_PRIVATE, fd, 4096));
	EXPECT(close(fd), 0);
	struct region r;
	for (int smaps = 0; smaps < 2; smaps++) {
		const char *file = smaps ? "/proc/self/smaps" : "/proc/self/maps";
		SHOW("%s:", file);
		memset(&r, 0, sizeof r);
		EXPECT_TRUE(find_region(file, (unsigned long)f, &r));
		EXPECT_TRUE(r.start == (unsigned long)f && r.end == (unsigned long)f + 8192);
		SHOW("file mapping: %s offset %lx %s", r.perms, r.off,
		     strcmp(r.path, FIX("big.bin")) ? r.path : "FIX(big.bin)");
		if (smaps) {
			EXPECT(r.size_kb, 8);
			EXPECT_TRUE(r.rss_kb >= 0 && r.rss_kb <= 8);
		}
	}
	/* Anonymous memory, one page of it made read-only then no access:
	 * the pages show their own permissions. */
	char *a = EXPECT_MAP(mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	EXPECT(mprotect(a + 4096, 4096, PROT_READ | PROT_EXEC), 0);
	EXPECT(mprotect(a + 8192, 4096, PROT_NONE), 0);
	const char *want[] = { "rw-p", "r-xp", "---p" };
	for (int i = 0; i < 3; i++) {
		memset(&r, 0, sizeof r);
		EXPECT_TRUE(find_region("/proc/self/maps", (unsigned long)a + i * 4096, &r));
		SHOW("anonymous page %d: %s [%s]", i, r.perms, r.path);
		if (strcmp(r.perms, want[i]))
			t_fail(want[i]);
	}
	char *s = EXPECT_MAP(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
				  -1, 0));
	memset(&r, 0, sizeof r);
	EXPECT_TRUE(find_region("/proc/self/maps", (unsigned long)s, &r));
	SHOW("shared anonymous: %s", r.perms);
	/* The stack is named. */
	int local;
	memset(&r, 0, sizeof r);
	EXPECT_TRUE(find_region("/proc/self/maps", (unsigned long)&local, &r));
	SHOW("stack: %s %s", r.perms, r.path);
	/* Gone after munmap. */
	EXPECT(munmap(f, 8192), 0);
	EXPECT_TRUE(!find_region("/proc/self/maps", (unsigned long)f, &r));

	/* environ: the environment the process started with, NUL-separated;
	 * setenv() later does not change it. */
	long n = t_slurp("/proc/self/environ", buf, sizeof buf);
	extern char **environ;
	char joined[4096];
	size_t len = 0;
	for (char **e = environ; *e; e++) {
		size_t l = strlen(*e) + 1;
		memcpy(joined + len, *e, l);
		len += l;
	}
	EXPECT_TRUE(n == (long)len && !memcmp(buf, joined, len));
	setenv("ADDED_LATER", "1", 1);
	EXPECT_TRUE(t_slurp("/proc/self/environ", buf, sizeof buf) == (long)len &&
		    !memmem(buf, len, "ADDED_LATER", 11));
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		char *args[] = { "/proc/self/exe", "environ", NULL };
		char *env[] = { "ONE=1", "TWO=two words", "EMPTY=", NULL };
		execve("/proc/self/exe", args, env);
		_exit(127);
	}
	int status;
	EXPECT_TRUE(waitpid(pid, &status, 0) == pid);
	EXPECT(status, 0);

	/* cwd: where chdir went, for this process and as another sees it. */
	EXPECT(chdir(FIX("dir")), 0);
	n = readlink("/proc/self/cwd", buf, sizeof buf - 1);
	buf[n < 0 ? 0 : n] = 0;
	EXPECT_TRUE(!strcmp(buf, FIX("dir")));
	EXPECT_TRUE(access("/proc/self/cwd/a", R_OK) == 0);
	int ready[2], go[2];
	EXPECT(pipe(ready), 0);
	EXPECT(pipe(go), 0);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		chdir("/tmp");
		write(ready[1], "x", 1);
		read(go[0], buf, 1);
		_exit(0);
	}
	EXPECT(read(ready[0], buf, 1), 1);
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/cwd", pid);
	n = readlink(path, buf, sizeof buf - 1);
	buf[n < 0 ? 0 : n] = 0;
	SHOW("the child's cwd: %s", buf);
	EXPECT(write(go[1], "x", 1), 1);
	EXPECT_TRUE(waitpid(pid, &status, 0) == pid);
	EXPECT(chdir("/"), 0);
	n = readlink("/proc/self/cwd", buf, sizeof buf - 1);
	buf[n < 0 ? 0 : n] = 0;
	SHOW("cwd after chdir(/): %s", buf);

	/* limits: every row is what getrlimit says, before and after
	 * setrlimit. */
	check_limits(1);
	struct rlimit nofile = { 100, 200 }, core = { 4096, RLIM_INFINITY };
	EXPECT(setrlimit(RLIMIT_NOFILE, &nofile), 0);
	EXPECT(setrlimit(RLIMIT_CORE, &core), 0);
	check_limits(0);

	/* oom_score_adj: a number in [-1000, 1000], which a process may
	 * raise (C's notation: 0x10 is 16); out of range and non-numbers are
	 * EINVAL and change nothing. */
	long adj = read_long("/proc/self/oom_score_adj");
	EXPECT_TRUE(adj >= -1000 && adj <= 1000);
	EXPECT(write_str("/proc/self/oom_score_adj", "500\n"), 4);
	EXPECT(read_long("/proc/self/oom_score_adj"), 500);
	EXPECT(write_str("/proc/self/oom_score_adj", " 0x10 "), 6);
	EXPECT(read_long("/proc/self/oom_score_adj"), 16);
	EXPECT(write_str("/proc/self/oom_score_adj", "1000"), 4);
	EXPECT(read_long("/proc/self/oom_score_adj"), 1000);
	EXPECT_ERR(write_str("/proc/self/oom_score_adj", "1001"), EINVAL);
	EXPECT_ERR(write_str("/proc/self/oom_score_adj", "many"), EINVAL);
	EXPECT_ERR(write_str("/proc/self/oom_score_adj", "12x"), EINVAL);
	EXPECT(read_long("/proc/self/oom_score_adj"), 1000);
	EXPECT(stat("/proc/self/oom_score_adj", (struct stat *)text), 0);
	EXPECT(((struct stat *)text)->st_mode & 07777, 0644);
	/* A child inherits it, and keeps it across execve. */
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		char *args[] = { "/bin/cat", "/proc/self/oom_score_adj", NULL };
		if (read_long("/proc/self/oom_score_adj") != 1000)
			_exit(1);
		execve(args[0], args, environ);
		_exit(127);
	}
	EXPECT_TRUE(waitpid(pid, &status, 0) == pid);
	EXPECT(status, 0);
	long score = read_long("/proc/self/oom_score");
	EXPECT_TRUE(score >= 0 && score <= 2000);

	/* thread-self: the calling thread's directory. */
	n = readlink("/proc/thread-self", buf, sizeof buf - 1);
	buf[n < 0 ? 0 : n] = 0;
	char tself[64];
	snprintf(tself, sizeof tself, "%d/task/%d", getpid(), getpid());
	EXPECT_TRUE(!strcmp(buf, tself));
	EXPECT(lstat("/proc/thread-self", (struct stat *)text), 0);
	EXPECT_TRUE(t_slurp("/proc/thread-self/comm", buf, sizeof buf) > 0);
	SHOW("thread-self/comm: %s", strtok(buf, "\n"));
	pthread_t th;
	int ok = 0;
	EXPECT_RC(pthread_create(&th, NULL, thread_self, &ok), 0);
	EXPECT_RC(pthread_join(th, NULL), 0);
	EXPECT_TRUE(ok);

	/* status's Umask: the process's own, as umask(2) last set it, and
	 * what a child inherits. */
	mode_t old = umask(027);
	EXPECT_TRUE(t_slurp("/proc/self/status", text, sizeof text) > 0);
	EXPECT_TRUE(strstr(text, "\nUmask:\t0027\n") != NULL);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		umask(0);
		_exit(t_slurp("/proc/self/status", text, sizeof text) > 0 &&
		      strstr(text, "\nUmask:\t0000\n") ? 0 : 1);
	}
	EXPECT_TRUE(waitpid(pid, &status, 0) == pid);
	EXPECT(status, 0);
	EXPECT_TRUE(t_slurp("/proc/self/status", text, sizeof text) > 0);
	EXPECT_TRUE(strstr(text, "\nUmask:\t0027\n") != NULL);
	umask(old);
	return t_done();
}
