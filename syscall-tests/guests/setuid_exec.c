/* Set-user-ID and set-group-ID programs (execve(2), capabilities(7),
 * credentials(7)): copies of this program, owned by other users and
 * groups with the set-ID bits on, are run from children that dropped to
 * uid 1000 (or stayed root); each copy reports the ids, AT_SECURE and the
 * auxiliary vector's ids, its capability sets, PR_GET_DUMPABLE and
 * /proc/self/status. no_new_privs, a group bit without group execute and
 * a program the caller may not read are covered too. Then what clears the
 * bits: write, pwrite, writev, truncate and ftruncate by a writer without
 * CAP_FSETID, and chown by root and by an owner. Natively this runs as
 * root on the host, in a temporary directory under /tmp. */
#include "caps.h"
#include <grp.h>
#include <sys/auxv.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/uio.h>

static char dir[64];

/* The path of `name` in the temporary directory (two at a time). */
static const char *at(const char *name)
{
	static char bufs[2][256];
	static int next;
	char *b = bufs[next++ % 2];
	snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
	return b;
}

/* ---- the copy's side: what it runs with ---- */

static void status_line(const char *key)
{
	char buf[4096];
	if (t_slurp("/proc/self/status", buf, sizeof buf) < 0) {
		SHOW("  status: unreadable");
		return;
	}
	char *p = strstr(buf, key);
	if (!p) {
		SHOW("  status: no %s", key);
		return;
	}
	char *end = strchr(p, '\n');
	if (end)
		*end = 0;
	for (char *c = p; *c; c++)
		if (*c == '\t')
			*c = ' ';
	SHOW("  status %s", p);
}

static int report(const char *label)
{
	uid_t r, e, s;
	gid_t gr, ge, gs;
	getresuid(&r, &e, &s);
	getresgid(&gr, &ge, &gs);
	SHOW("%s", label);
	SHOW("  uid r=%u e=%u s=%u fs=%d", r, e, s, setfsuid(-1));
	SHOW("  gid r=%u e=%u s=%u fs=%d", gr, ge, gs, setfsgid(-1));
	SHOW("  AT_SECURE=%lu AT_UID=%lu AT_EUID=%lu AT_GID=%lu AT_EGID=%lu", getauxval(AT_SECURE),
	     getauxval(AT_UID), getauxval(AT_EUID), getauxval(AT_GID), getauxval(AT_EGID));
	/* The sets as seen against the bounding set, which differs between
	 * hosts (the harness may run without some capability). */
	unsigned long long bset = 0;
	for (int i = 0; i < 64; i++)
		if (prctl(PR_CAPBSET_READ, i, 0, 0, 0) == 1)
			bset |= 1ULL << i;
	struct sets c = get();
	char eff[32], prm[32];
	snprintf(eff, sizeof eff, "%llx", c.eff);
	snprintf(prm, sizeof prm, "%llx", c.prm);
	if (c.eff == bset)
		strcpy(eff, "bounding");
	if (c.prm == bset)
		strcpy(prm, "bounding");
	SHOW("  caps eff=%s prm=%s inh=%llx ambient(NET_BIND_SERVICE)=%d", eff, prm, c.inh,
	     prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_NET_BIND_SERVICE, 0, 0));
	SHOW("  dumpable=%d no_new_privs=%d", prctl(PR_GET_DUMPABLE, 0, 0, 0, 0),
	     prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
	status_line("Uid:");
	status_line("Gid:");
	fflush(stdout);
	return 0;
}

/* ---- the runner's side ---- */

static void become(uid_t uid, gid_t gid)
{
	if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 ||
	    setresuid(uid, uid, uid) != 0)
		SHOW("dropping to %u failed: %s", uid, errname(errno));
}

/* Copies this program to `name`, then gives it `uid`, `gid`, `mode`
 * (chown first: it clears the set-ID bits). */
static void install(const char *name, uid_t uid, gid_t gid, int mode)
{
	static char image[4 << 20];
	static long len = -1;
	if (len < 0) {
		int in = open("/proc/self/exe", O_RDONLY);
		len = 0;
		for (long n; in >= 0 && (n = read(in, image + len, sizeof image - len)) > 0;)
			len += n;
		close(in);
	}
	int fd = open(at(name), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0700);
	if (fd < 0 || write(fd, image, len) != len || fchown(fd, uid, gid) != 0 ||
	    fchmod(fd, mode) != 0)
		SHOW("setup of %s failed: %s", name, errname(errno));
	close(fd);
}

enum how { ROOT, USER, USER_NNP, USER_AMBIENT, REAL_USER_EFFECTIVE_ROOT };

/* Runs copy `name` from a child set up as `how`; prints how it ended. */
static void run(const char *name, enum how how)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		switch (how) {
		case ROOT:
			break;
		case USER:
			become(1000, 1000);
			break;
		case USER_NNP:
			become(1000, 1000);
			if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
				SHOW("PR_SET_NO_NEW_PRIVS: %s", errname(errno));
			break;
		case USER_AMBIENT: {
			/* Keeps CAP_NET_BIND_SERVICE as an ambient capability. */
			prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0);
			become(1000, 1000);
			struct sets s = get();
			s.inh |= 1ULL << CAP_NET_BIND_SERVICE;
			if (set(s) != 0 ||
			    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_BIND_SERVICE, 0, 0) != 0)
				SHOW("ambient setup: %s", errname(errno));
			break;
		}
		case REAL_USER_EFFECTIVE_ROOT:
			if (setresgid(1000, 0, 0) != 0 || setresuid(1000, 0, 0) != 0)
				SHOW("setresuid: %s", errname(errno));
			break;
		}
		char label[128];
		snprintf(label, sizeof label, "-- %s (%s)", name,
			 how == ROOT		  ? "root"
			 : how == USER		  ? "uid 1000"
			 : how == USER_NNP	  ? "uid 1000, no_new_privs"
			 : how == USER_AMBIENT	  ? "uid 1000, ambient"
						  : "real 1000, effective 0");
		char *argv[] = {"setuid_exec", "report", label, NULL};
		char *envp[] = {"LD_PRELOAD=", NULL};
		execve(at(name), argv, envp);
		SHOW("execve %s: %s", name, errname(errno));
		_exit(3);
	}
	int st = -1;
	waitpid(pid, &st, 0);
	EXPECT(st, 0);
}

/* ---- what clears the bits ---- */

static int mode_of(const char *name)
{
	struct stat st;
	if (stat(at(name), &st) != 0)
		return -1;
	return st.st_mode & 07777;
}

/* Makes `name` with `mode`, owner `uid`, group `gid`, some content. */
static void make(const char *name, int mode, uid_t uid, gid_t gid)
{
	int fd = open(at(name), O_CREAT | O_WRONLY | O_TRUNC, 0600);
	if (fd < 0 || write(fd, "0123456789", 10) != 10 || fchown(fd, uid, gid) != 0 ||
	    fchmod(fd, mode) != 0)
		SHOW("setup of %s failed: %s", name, errname(errno));
	close(fd);
}

enum op { WRITE, PWRITE, WRITEV, TRUNCATE, FTRUNCATE, CHOWN_SAME, CHOWN_GROUP };

static const char *op_name[] = {"write", "pwrite", "writev", "truncate", "ftruncate",
				"chown(same owner)", "chown(own group)"};

/* `op` on a new file of `mode`, owner `owner`, group `group`, by `who`
 * (0: root with every capability, -1: root without CAP_FSETID, else that
 * uid with group 1000); prints the mode after. */
static void clears(enum op op, int mode, uid_t owner, gid_t group, int who)
{
	make("victim", mode, owner, group);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		if (who > 0) {
			become(who, 1000);
		} else if (who < 0) {
			struct sets s = get();
			s.eff &= ~(1ULL << CAP_FSETID);
			set(s);
		}
		long r = 0;
		int fd = open(at("victim"), O_WRONLY);
		struct iovec iov = {"ab", 2};
		switch (op) {
		case WRITE:
			r = write(fd, "ab", 2);
			break;
		case PWRITE:
			r = pwrite(fd, "ab", 2, 4);
			break;
		case WRITEV:
			r = writev(fd, &iov, 1);
			break;
		case TRUNCATE:
			r = truncate(at("victim"), 4);
			break;
		case FTRUNCATE:
			r = ftruncate(fd, 4);
			break;
		case CHOWN_SAME:
			r = chown(at("victim"), owner, group);
			break;
		case CHOWN_GROUP:
			r = chown(at("victim"), -1, 1000);
			break;
		}
		if (r < 0)
			SHOW("  %s failed: %s", op_name[op], errname(errno));
		_exit(0);
	}
	waitpid(pid, NULL, 0);
	SHOW("%s of %04o (owner %u, group %u) by %s: mode %04o", op_name[op], mode, owner, group,
	     who == 0 ? "root" : who < 0 ? "root without CAP_FSETID" : "uid 1000", mode_of("victim"));
	unlink(at("victim"));
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "report"))
		return report(argv[2]);
	EXPECT(getuid(), 0);
	strcpy(dir, "/tmp/setuid.XXXXXX");
	if (!mkdtemp(dir)) {
		SHOW("mkdtemp: %s", errname(errno));
		return 1;
	}
	chmod(dir, 0755);

	install("plain", 0, 0, 0755);
	install("suid-root", 0, 0, 04755);
	install("suid-2000", 2000, 2000, 04755);
	install("sgid-3000", 0, 3000, 02755);
	install("sgid-nox", 0, 3000, 02745);
	install("both", 2000, 3000, 06755);
	install("unreadable", 0, 0, 0711);

	run("plain", USER);
	run("suid-root", USER);
	run("suid-2000", USER);
	run("sgid-3000", USER);
	run("sgid-nox", USER);
	run("both", USER);
	run("unreadable", USER);
	run("suid-2000", ROOT);
	run("plain", ROOT);
	run("suid-root", USER_NNP);
	run("both", USER_NNP);
	run("plain", USER_AMBIENT);
	run("suid-2000", USER_AMBIENT);
	run("plain", REAL_USER_EFFECTIVE_ROOT);
	run("plain", USER_NNP);

	/* A change of the effective ids makes a process undumpable too,
	 * one of the real id does not; PR_SET_DUMPABLE undoes it. */
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		EXPECT(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 1);
		EXPECT(setresuid(1000, -1, -1), 0);
		EXPECT(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 1);
		EXPECT(setresuid(-1, 1000, -1), 0);
		EXPECT(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 0);
		EXPECT(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), 0);
		EXPECT(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 1);
		EXPECT(setresuid(-1, 0, -1), 0);
		EXPECT(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 0);
		EXPECT_ERR(prctl(PR_SET_DUMPABLE, 2, 0, 0, 0), EINVAL);
		fflush(stdout);
		_exit(t_failures ? 1 : 0);
	}
	int st = -1;
	waitpid(pid, &st, 0);
	EXPECT(st, 0);

	/* Root with CAP_FSETID keeps the bits; without it, or another
	 * writer, loses them (the group one only with group execute, or
	 * from a writer outside the group). */
	enum op ops[] = {WRITE, PWRITE, WRITEV, TRUNCATE, FTRUNCATE};
	for (unsigned i = 0; i < sizeof ops / sizeof ops[0]; i++) {
		clears(ops[i], 06777, 0, 0, 0);
		clears(ops[i], 06777, 0, 0, -1);
		clears(ops[i], 06777, 0, 0, 1000);
		clears(ops[i], 02767, 0, 0, 1000);
		clears(ops[i], 02767, 0, 1000, 1000);
	}
	clears(CHOWN_SAME, 06755, 0, 0, 0);
	clears(CHOWN_SAME, 02745, 0, 0, 0);
	clears(CHOWN_SAME, 02745, 0, 3000, -1);
	clears(CHOWN_SAME, 06755, 1000, 1000, 1000);
	clears(CHOWN_GROUP, 06755, 1000, 0, 1000);
	clears(CHOWN_GROUP, 02745, 1000, 0, 1000);

	/* A directory keeps its set-group-ID bit through chown. */
	mkdir(at("d"), 02755);
	chmod(at("d"), 02755);
	EXPECT(chown(at("d"), 0, 0), 0);
	SHOW("chown of a 02755 directory: mode %04o", mode_of("d"));
	rmdir(at("d"));

	const char *names[] = {"plain", "suid-root", "suid-2000", "sgid-3000",
			       "sgid-nox", "both", "unreadable", NULL};
	for (int i = 0; names[i]; i++)
		unlink(at(names[i]));
	rmdir(dir);
	return t_done();
}
