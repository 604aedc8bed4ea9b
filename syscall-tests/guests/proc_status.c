/* /proc/PID/status (issue 20): the keys Linux 6.x prints, in its order
 * (those every x86-64 6.x kernel has); the memory lines in "%8lu kB",
 * VmRSS the sum of RssAnon, RssFile and RssShmem, growing as anonymous
 * memory is touched; the reader itself running, a child asleep. */
#include "t.h"
#include <sys/mman.h>

static char buf[16384];

static const char *order[] = {
	"Name",	    "Umask",	 "State",	"Tgid",	    "Ngid",	    "Pid",
	"PPid",	    "TracerPid", "Uid",		"Gid",	    "FDSize",	    "Groups",
	"NStgid",   "NSpid",	 "NSpgid",	"NSsid",    "VmPeak",	    "VmSize",
	"VmLck",    "VmPin",	 "VmHWM",	"VmRSS",    "RssAnon",	    "RssFile",
	"RssShmem", "VmData",	 "VmStk",	"VmExe",    "VmLib",	    "VmPTE",
	"VmSwap",   "HugetlbPages", "CoreDumping", "THP_enabled", "Threads", "SigQ",
	"SigPnd",   "ShdPnd",	 "SigBlk",	"SigIgn",   "SigCgt",	    "CapInh",
	"CapPrm",   "CapEff",	 "CapBnd",	"CapAmb",   "NoNewPrivs",   "Seccomp",
	"Seccomp_filters", "Speculation_Store_Bypass", "SpeculationIndirectBranch",
	"Cpus_allowed", "Cpus_allowed_list", "Mems_allowed", "Mems_allowed_list",
	"voluntary_ctxt_switches", "nonvoluntary_ctxt_switches",
};

/* The value of `key` in buf ("" when missing). */
static const char *field(const char *key, char *out, size_t cap)
{
	char k[64];
	snprintf(k, sizeof k, "\n%s:\t", key);
	const char *p = strstr(buf, k);
	out[0] = 0;
	if (p) {
		p += strlen(k);
		size_t n = strcspn(p, "\n");
		snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
	}
	return out;
}

static long kb(const char *key)
{
	char v[64];
	field(key, v, sizeof v);
	unsigned long n;
	int used = 0;
	/* "%8lu kB": right-aligned in eight columns */
	if (strlen(v) < 11 || sscanf(v, "%lu kB%n", &n, &used) != 1 || v[used] || strlen(v) != 11)
		return -1;
	return (long)n;
}

/* Whether the keys of `order` appear in that order, each once, every line
 * being "Key:\tvalue". */
static int keys_in_order(void)
{
	size_t next = 0;
	for (char *l = buf; *l;) {
		char *end = strchr(l, '\n');
		if (!end)
			return 0;
		char *colon = strchr(l, ':');
		if (!colon || colon > end || colon[1] != '\t')
			return 0;
		size_t n = colon - l;
		for (size_t i = next; i < sizeof order / sizeof *order; i++)
			if (strlen(order[i]) == n && !strncmp(order[i], l, n)) {
				next = i + 1;
				break;
			}
		l = end + 1;
	}
	return next == sizeof order / sizeof *order;
}

static int every_key(void)
{
	char v[256];
	for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
		char k[64];
		snprintf(k, sizeof k, "\n%s:\t", order[i]);
		if (i && !strstr(buf, k))
			return 0;
	}
	return !strncmp(buf, "Name:\t", 6) && field("State", v, sizeof v);
}

int main(void)
{
	char v[256];
	EXPECT_TRUE(t_slurp("/proc/self/status", buf, sizeof buf) > 0);
	EXPECT_TRUE(every_key());
	EXPECT_TRUE(keys_in_order());
	SHOW("State %s", field("State", v, sizeof v));
	const char *mem[] = {"VmPeak", "VmSize", "VmLck", "VmPin", "VmHWM", "VmRSS", "RssAnon",
			     "RssFile", "RssShmem", "VmData", "VmStk", "VmExe", "VmLib", "VmPTE",
			     "VmSwap", "HugetlbPages"};
	int bad = 0;
	for (size_t i = 0; i < sizeof mem / sizeof *mem; i++)
		if (kb(mem[i]) < 0) {
			SHOW("%s: %s", mem[i], field(mem[i], v, sizeof v));
			bad++;
		}
	EXPECT(bad, 0);
	EXPECT_TRUE(kb("VmRSS") == kb("RssAnon") + kb("RssFile") + kb("RssShmem"));
	EXPECT_TRUE(kb("VmSize") >= kb("VmRSS") && kb("VmPeak") >= kb("VmSize"));
	EXPECT_TRUE(kb("VmHWM") >= kb("VmRSS"));
	EXPECT_TRUE(kb("VmExe") > 0 && kb("VmStk") > 0 && kb("VmData") > 0);
	SHOW("VmLck %ld VmPin %ld HugetlbPages %ld", kb("VmLck"), kb("VmPin"), kb("HugetlbPages"));
	SHOW("CoreDumping %s", field("CoreDumping", v, sizeof v));
	SHOW("Seccomp_filters %s", field("Seccomp_filters", v, sizeof v));
	/* Touching 4 MiB of anonymous memory adds it to RssAnon. */
	long anon = kb("RssAnon"), size = kb("VmSize");
	size_t len = 4 << 20;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT_TRUE(p != MAP_FAILED);
	EXPECT_TRUE(t_slurp("/proc/self/status", buf, sizeof buf) > 0);
	EXPECT_TRUE(kb("VmSize") >= size + 4096);
	long before = kb("RssAnon");
	memset(p, 1, len);
	EXPECT_TRUE(t_slurp("/proc/self/status", buf, sizeof buf) > 0);
	EXPECT_TRUE(kb("RssAnon") >= before + 4096 && kb("RssAnon") >= anon + 4096);
	EXPECT_TRUE(kb("VmData") >= 4096);
	/* A child waiting in read(2) sleeps. */
	int fds[2];
	EXPECT(pipe(fds), 0);
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		char x;
		read(fds[0], &x, 1);
		_exit(0);
	}
	usleep(200000);
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/status", c);
	EXPECT_TRUE(t_slurp(path, buf, sizeof buf) > 0);
	SHOW("child State %s", field("State", v, sizeof v));
	EXPECT_TRUE(keys_in_order());
	EXPECT(write(fds[1], "x", 1), 1);
	EXPECT_TRUE(waitpid(c, NULL, 0) == c);
	return t_done();
}
