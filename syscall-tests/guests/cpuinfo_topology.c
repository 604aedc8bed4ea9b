/* /proc/cpuinfo's topology lines agree with /sys/devices/system/cpu:
 * for each processor, `physical id` and `core id` are its
 * topology/physical_package_id and core_id; `siblings` counts the
 * processors of its package and `cpu cores` the cores among them; the
 * processors that share its core are those thread_siblings_list (and
 * core_cpus_list, where the kernel has it) name. Only counts of
 * disagreements are printed: the machine itself differs from host to host. */
#include "t.h"

#define MAX_CPUS 1024

struct cpu {
	int processor, physical_id, siblings, core_id, cpu_cores;
};

static struct cpu cpus[MAX_CPUS];
static int ncpus;

static char text[1 << 20];

/* The value of "key\t...: value" on line `line`, or -1. */
static int field(const char *line, const char *key)
{
	size_t n = strlen(key);
	if (strncmp(line, key, n) != 0 || (line[n] != '\t' && line[n] != ' '))
		return -1;
	const char *colon = strchr(line, ':');
	return colon ? atoi(colon + 1) : -1;
}

static void parse_cpuinfo(void)
{
	if (t_slurp("/proc/cpuinfo", text, sizeof text) < 0)
		return;
	char *save = NULL;
	struct cpu *c = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		int v;
		if ((v = field(line, "processor")) >= 0 && ncpus < MAX_CPUS) {
			c = &cpus[ncpus++];
			*c = (struct cpu){ v, -1, -1, -1, -1 };
		} else if (!c) {
			continue;
		} else if ((v = field(line, "physical id")) >= 0) {
			c->physical_id = v;
		} else if ((v = field(line, "siblings")) >= 0) {
			c->siblings = v;
		} else if ((v = field(line, "core id")) >= 0) {
			c->core_id = v;
		} else if ((v = field(line, "cpu cores")) >= 0) {
			c->cpu_cores = v;
		}
	}
}

/* /sys/devices/system/cpu/cpuN/topology/NAME as a number, or -1. */
static int topo_number(int n, const char *name)
{
	char path[128], buf[64];
	snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", n, name);
	return t_slurp(path, buf, sizeof buf) > 0 ? atoi(buf) : -1;
}

/* The CPU list in topology/NAME as a bitmap of `set` (MAX_CPUS bits);
 * 0 if it is missing. */
static int topo_list(int n, const char *name, unsigned char *set)
{
	char path[128], buf[4096];
	snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", n, name);
	memset(set, 0, MAX_CPUS);
	if (t_slurp(path, buf, sizeof buf) <= 0)
		return 0;
	for (char *p = buf; *p && *p != '\n';) {
		char *end;
		long a = strtol(p, &end, 10), b = a;
		if (end == p)
			return 0;
		if (*end == '-')
			b = strtol(end + 1, &end, 10);
		for (long i = a; i <= b && i < MAX_CPUS; i++)
			set[i] = 1;
		p = *end == ',' ? end + 1 : end;
	}
	return 1;
}

static struct cpu *find(int processor)
{
	for (int i = 0; i < ncpus; i++)
		if (cpus[i].processor == processor)
			return &cpus[i];
	return NULL;
}

int main(void)
{
	parse_cpuinfo();
	EXPECT_TRUE(ncpus >= 1);
	int bad_fields = 0, bad_core_id = 0, bad_package = 0, bad_siblings = 0;
	int bad_cores = 0, bad_threads = 0, bad_core_cpus = 0;
	static unsigned char threads[MAX_CPUS], core_cpus[MAX_CPUS];
	for (int i = 0; i < ncpus; i++) {
		struct cpu *c = &cpus[i];
		if (c->physical_id < 0 || c->siblings < 1 || c->core_id < 0 || c->cpu_cores < 1) {
			bad_fields++;
			continue;
		}
		if (topo_number(c->processor, "core_id") != c->core_id)
			bad_core_id++;
		if (topo_number(c->processor, "physical_package_id") != c->physical_id)
			bad_package++;
		/* siblings: the package's processors; cpu cores: its cores. */
		int in_package = 0, cores = 0;
		for (int j = 0; j < ncpus; j++) {
			if (cpus[j].physical_id != c->physical_id)
				continue;
			in_package++;
			int first = 1;
			for (int k = 0; k < j; k++)
				if (cpus[k].physical_id == c->physical_id && cpus[k].core_id == cpus[j].core_id)
					first = 0;
			cores += first;
		}
		if (c->siblings != in_package)
			bad_siblings++;
		if (c->cpu_cores != cores)
			bad_cores++;
		/* The processors of its core are its thread siblings. */
		if (!topo_list(c->processor, "thread_siblings_list", threads)) {
			bad_threads++;
			continue;
		}
		for (int j = 0; j < ncpus; j++) {
			int same_core = cpus[j].physical_id == c->physical_id &&
					cpus[j].core_id == c->core_id;
			int p = cpus[j].processor;
			if (p < MAX_CPUS && same_core != threads[p])
				bad_threads++;
		}
		if (topo_list(c->processor, "core_cpus_list", core_cpus) &&
		    memcmp(threads, core_cpus, MAX_CPUS) != 0)
			bad_core_cpus++;
	}
	/* siblings = cpu cores x threads per core, with the threads per core
	 * thread_siblings_list names, where every core of the package has as
	 * many (hybrid CPUs' cores differ). */
	int bad_ratio = 0;
	for (int i = 0; i < ncpus; i++) {
		struct cpu *c = &cpus[i];
		int width = -1, uniform = 1;
		for (int j = 0; j < ncpus && uniform; j++) {
			if (cpus[j].physical_id != c->physical_id)
				continue;
			int w = 0;
			if (!topo_list(cpus[j].processor, "thread_siblings_list", threads))
				uniform = 0;
			for (int p = 0; p < MAX_CPUS; p++)
				w += threads[p] && find(p);
			if (width >= 0 && w != width)
				uniform = 0;
			width = w;
		}
		if (uniform && width > 0 && c->siblings != c->cpu_cores * width)
			bad_ratio++;
	}
	EXPECT(bad_fields, 0);
	EXPECT(bad_core_id, 0);
	EXPECT(bad_package, 0);
	EXPECT(bad_siblings, 0);
	EXPECT(bad_cores, 0);
	EXPECT(bad_threads, 0);
	EXPECT(bad_core_cpus, 0);
	EXPECT(bad_ratio, 0);
	return t_done();
}
