/* Permission checks go by the effective capabilities, not by uid 0
 * (capabilities(7)): root drops one capability at a time from its effective
 * set, in a child, and the matching operation is refused; then what changes
 * of user ids do to the sets (PR_SET_KEEPCAPS, setfsuid, seteuid) and to the
 * checks. Natively this runs as root on the host: everything happens in a
 * temporary directory and in children, and of the calls that would change
 * the host (sethostname, ...) only the refusal is tried. */
#include "caps.h"
#include <grp.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/xattr.h>

#define BIT(c) (1ULL << (c))

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

/* Leaves the effective set without `caps` (still permitted). */
static void drop(unsigned long long caps)
{
	struct sets s = get();
	s.eff &= ~caps;
	if (set(s) != 0)
		SHOW("capset failed: %s", errname(errno));
}

static int mode_of(const char *p)
{
	struct stat st;
	if (stat(p, &st) != 0)
		return -1;
	return st.st_mode & 07777;
}

static int uid_of(const char *p)
{
	struct stat st;
	if (stat(p, &st) != 0)
		return -1;
	return (int)st.st_uid;
}

/* ---- files ---- */

/* execve of a `#!` script whose interpreter does not exist: ENOENT once
 * the script itself may be executed. */
static long exec_script(const char *name)
{
	char *argv[] = {"script", NULL};
	return execve(at(name), argv, argv + 1);
}

static void dac_override(void)
{
	/* Reading is still allowed by CAP_DAC_READ_SEARCH; writing is not. */
	drop(BIT(CAP_DAC_OVERRIDE));
	EXPECT_ERR(exec_script("script"), EACCES);
	int fd = open(at("zero"), O_RDONLY);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	EXPECT_ERR(open(at("zero"), O_WRONLY), EACCES);
	EXPECT_ERR(open(at("zero"), O_RDONLY | O_TRUNC), EACCES);
	EXPECT_ERR(faccessat(AT_FDCWD, at("zero"), W_OK, AT_EACCESS), EACCES);
	EXPECT(faccessat(AT_FDCWD, at("zero"), R_OK, AT_EACCESS), 0);
	/* access(2) asks as the real user: a real root with its permitted
	 * capabilities. */
	EXPECT(access(at("zero"), W_OK), 0);
	/* A directory without permissions: read (list) yes, add a name no. */
	fd = open(at("closed"), O_RDONLY | O_DIRECTORY);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	EXPECT_ERR(mkdir(at("closed/sub"), 0755), EACCES);
	EXPECT_ERR(open(at("closed/new"), O_CREAT | O_WRONLY, 0644), EACCES);

	drop(BIT(CAP_DAC_READ_SEARCH));
	EXPECT_ERR(open(at("zero"), O_RDONLY), EACCES);
	EXPECT_ERR(open(at("closed"), O_RDONLY | O_DIRECTORY), EACCES);
	EXPECT_ERR(faccessat(AT_FDCWD, at("zero"), R_OK, AT_EACCESS), EACCES);
	EXPECT(access(at("zero"), R_OK), 0);
	/* The owner's own bits still count. */
	fd = open(at("mine"), O_RDWR);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	EXPECT_ERR(open(at("theirs"), O_RDONLY), EACCES);
	/* The group's and others' bits. */
	EXPECT(faccessat(AT_FDCWD, at("group-r"), R_OK, AT_EACCESS), 0);
	EXPECT_ERR(faccessat(AT_FDCWD, at("group-r"), W_OK, AT_EACCESS), EACCES);
	EXPECT(faccessat(AT_FDCWD, at("other-w"), W_OK, AT_EACCESS), 0);
	EXPECT_ERR(faccessat(AT_FDCWD, at("other-w"), R_OK, AT_EACCESS), EACCES);
}

static void full_caps_files(void)
{
	EXPECT_ERR(exec_script("script"), ENOENT);
	EXPECT_ERR(exec_script("script-nox"), EACCES);
	/* With every capability: anything but executing a file without an
	 * execute bit. */
	int fd = open(at("zero"), O_RDWR);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	EXPECT(faccessat(AT_FDCWD, at("zero"), R_OK | W_OK, AT_EACCESS), 0);
	EXPECT_ERR(faccessat(AT_FDCWD, at("zero"), X_OK, AT_EACCESS), EACCES);
	EXPECT(faccessat(AT_FDCWD, at("theirs-x"), X_OK, AT_EACCESS), 0);
	EXPECT(faccessat(AT_FDCWD, at("closed"), X_OK | W_OK, AT_EACCESS), 0);
}

static void chown_cap(void)
{
	drop(BIT(CAP_CHOWN));
	EXPECT_ERR(chown(at("mine"), 1234, -1), EPERM);
	EXPECT_ERR(chown(at("mine"), -1, 54321), EPERM);
	EXPECT_ERR(chown(at("theirs"), -1, 0), EPERM);
	EXPECT_ERR(chown(at("theirs"), 0, -1), EPERM);
	/* The owner may keep the owner and pick one of its own groups. */
	EXPECT(chown(at("mine"), 0, 0), 0);
	EXPECT(chown(at("mine"), -1, -1), 0);
	EXPECT(uid_of(at("mine")), 0);
}

static void chown_with_cap(void)
{
	/* A change of owner clears set-user-ID, root's too; set-group-ID
	 * without group execute stays for a member of the group. */
	EXPECT(chown(at("suid-chown"), 0, 0), 0);
	EXPECT(mode_of(at("suid-chown")), 02740);
	EXPECT(chown(at("sgidx-chown"), 0, 0), 0);
	EXPECT(mode_of(at("sgidx-chown")), 0710);
	EXPECT(chown(at("scratch"), 1234, 54321), 0);
	EXPECT(uid_of(at("scratch")), 1234);
	EXPECT(chown(at("scratch"), 0, 0), 0);
}

static void fowner(void)
{
	drop(BIT(CAP_FOWNER));
	EXPECT_ERR(chmod(at("theirs"), 0644), EPERM);
	struct timespec ts[2] = {{1, 0}, {2, 0}};
	EXPECT_ERR(utimensat(AT_FDCWD, at("theirs"), ts, 0), EPERM);
	/* The current time suits whoever may write it (DAC_OVERRIDE). */
	EXPECT(utimensat(AT_FDCWD, at("theirs"), NULL, 0), 0);
	EXPECT_ERR(open(at("theirs"), O_RDONLY | O_NOATIME), EPERM);
	int fd = open(at("mine"), O_RDONLY | O_NOATIME);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	EXPECT(chmod(at("mine"), 0600), 0);
	/* A sticky directory: only the file's or the directory's owner. */
	EXPECT_ERR(unlink(at("sticky/f")), EPERM);
	EXPECT_ERR(rename(at("sticky/f"), at("sticky/g")), EPERM);
	EXPECT(unlink(at("sticky/own")), 0);
}

static void fowner_with_cap(void)
{
	EXPECT(chmod(at("theirs"), 0600), 0);
	struct timespec ts[2] = {{1, 0}, {2, 0}};
	EXPECT(utimensat(AT_FDCWD, at("theirs"), ts, 0), 0);
	int fd = open(at("theirs"), O_RDONLY | O_NOATIME);
	EXPECT_TRUE(fd >= 0);
	close(fd);
}

static void write_one(const char *p)
{
	int fd = open(p, O_WRONLY);
	EXPECT(write(fd, "x", 1), 1);
	close(fd);
}

static void fsetid(void)
{
	/* A write keeps the set-ID bits for CAP_FSETID. */
	write_one(at("suid"));
	EXPECT(mode_of(at("suid")), 06755);
	/* Not in the file's group: set-group-ID needs CAP_FSETID. */
	EXPECT(chmod(at("sgid"), 02755), 0);
	EXPECT(mode_of(at("sgid")), 02755);
	drop(BIT(CAP_FSETID));
	EXPECT(chmod(at("sgid"), 02750), 0);
	EXPECT(mode_of(at("sgid")), 0750);
	/* ... and clears them without (set-group-ID: when group-executable). */
	write_one(at("suid"));
	EXPECT(mode_of(at("suid")), 0755);
	write_one(at("sgid-nox"));
	EXPECT(mode_of(at("sgid-nox")), 02640);
	/* In it: kept. */
	EXPECT(chmod(at("mine"), 02640), 0);
	EXPECT(mode_of(at("mine")), 02640);
	EXPECT(chmod(at("mine"), 0600), 0);
}

static void xattr_admin(void)
{
	drop(BIT(CAP_SYS_ADMIN));
	char v[8];
	EXPECT_ERR(setxattr(at("mine"), "trusted.cap", "x", 1, 0), EPERM);
	EXPECT_ERR(getxattr(at("mine"), "trusted.cap", v, sizeof v), ENODATA);
}

/* ---- processes ---- */

static pid_t other;

static void kill_cap(void)
{
	EXPECT(kill(other, 0), 0);
	drop(BIT(CAP_KILL));
	EXPECT_ERR(kill(other, 0), EPERM);
	EXPECT_ERR(kill(other, SIGTERM), EPERM);
	EXPECT_ERR(syscall(SYS_tgkill, other, other, 0), EPERM);
	/* SIGCONT within the session goes anywhere. */
	EXPECT(kill(other, SIGCONT), 0);
	/* A process of our own uid. */
	EXPECT(kill(getpid(), 0), 0);
}

static void setuid_cap(void)
{
	drop(BIT(CAP_SETUID));
	EXPECT_ERR(setuid(1234), EPERM);
	EXPECT_ERR(setresuid(-1, 1234, -1), EPERM);
	EXPECT_ERR(setreuid(1234, -1), EPERM);
	/* An id the task already has is fine. */
	EXPECT(setuid(0), 0);
	/* setfsuid cannot say no: the old value, and nothing changed. */
	EXPECT(setfsuid(1234), 0);
	EXPECT(setfsuid(-1), 0);
}

static void setgid_cap(void)
{
	drop(BIT(CAP_SETGID));
	EXPECT_ERR(setgid(54321), EPERM);
	EXPECT_ERR(setresgid(-1, 54321, -1), EPERM);
	EXPECT_ERR(setgroups(0, NULL), EPERM);
	EXPECT_ERR(setgroups(-1, NULL), EPERM);
	EXPECT(setgid(0), 0);
}

static void sys_admin(void)
{
	drop(BIT(CAP_SYS_ADMIN));
	EXPECT_ERR(sethostname("capcheck", 8), EPERM);
	EXPECT_ERR(setdomainname("capcheck", 8), EPERM);
	static char longer[128] = "capcheck";
	EXPECT_ERR(sethostname(longer, 100), EPERM);
}

static void sys_chroot(void)
{
	drop(BIT(CAP_SYS_CHROOT));
	EXPECT_ERR(chroot(dir), EPERM);
}

static void sys_chroot_with_cap(void)
{
	EXPECT(chroot(dir), 0);
	EXPECT(access("/mine", F_OK), 0);
}

static void sys_nice(void)
{
	drop(BIT(CAP_SYS_NICE));
	EXPECT_ERR(setpriority(PRIO_PROCESS, 0, -1), EACCES);
}

static void sys_resource(void)
{
	struct rlimit r = {256, 512};
	EXPECT(setrlimit(RLIMIT_NOFILE, &r), 0);
	/* Only a writer with CAP_SYS_RESOURCE sets the floor. */
	int fd = open("/proc/self/oom_score_adj", O_WRONLY);
	EXPECT_TRUE(fd >= 0);
	EXPECT(write(fd, "0", 1), 1);
	drop(BIT(CAP_SYS_RESOURCE));
	r.rlim_max = 513;
	EXPECT_ERR(setrlimit(RLIMIT_NOFILE, &r), EPERM);
	r.rlim_max = 400;
	EXPECT(setrlimit(RLIMIT_NOFILE, &r), 0);
	EXPECT_ERR(write(fd, "-1", 2), EACCES);
	EXPECT(write(fd, "5", 1), 1);
	EXPECT(write(fd, "0", 1), 1);
	close(fd);
}

static void net_bind(void)
{
	drop(BIT(CAP_NET_BIND_SERVICE));
	int s = socket(AF_INET, SOCK_STREAM, 0);
	EXPECT_TRUE(s >= 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(81)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	errno = 0;
	int r = bind(s, (struct sockaddr *)&a, sizeof a);
	int e = errno;
	/* (a host that lets everyone bind low ports says so) */
	char buf[32] = "1024";
	t_slurp("/proc/sys/net/ipv4/ip_unprivileged_port_start", buf, sizeof buf);
	EXPECT_TRUE((r == -1 && e == EACCES) || atoi(buf) <= 81);
	close(s);
}

/* ---- changes of user ids ---- */

static void keepcaps(void)
{
	struct sets before = get();
	EXPECT(prctl(PR_GET_KEEPCAPS, 0, 0, 0, 0), 0);
	EXPECT_ERR(prctl(PR_SET_KEEPCAPS, 2, 0, 0, 0), EINVAL);
	EXPECT(prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0), 0);
	EXPECT(prctl(PR_GET_KEEPCAPS, 0, 0, 0, 0), 1);
	EXPECT(prctl(PR_GET_SECUREBITS, 0, 0, 0, 0), 0x10);
	EXPECT(setresuid(1234, 1234, 1234), 0);
	struct sets after = get();
	EXPECT_TRUE(after.prm == before.prm);
	EXPECT_TRUE(after.eff == 0);
	/* Plain uid checks until a capability is made effective again. */
	EXPECT_ERR(open(at("zero"), O_RDONLY), EACCES);
	EXPECT_ERR(chown(at("scratch"), 1234, -1), EPERM);
	after.eff = BIT(CAP_DAC_OVERRIDE) | BIT(CAP_CHOWN);
	EXPECT(set(after), 0);
	int fd = open(at("zero"), O_RDWR);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	EXPECT(chown(at("scratch"), 1234, -1), 0);
	EXPECT(chown(at("scratch"), 0, -1), 0);
	/* CAP_SETUID is permitted but not effective. */
	EXPECT_ERR(setuid(0), EPERM);
}

static void no_keepcaps(void)
{
	EXPECT(setresuid(1234, 1234, 1234), 0);
	struct sets s = get();
	EXPECT_TRUE(s.eff == 0 && s.prm == 0);
	EXPECT_ERR(open(at("zero"), O_RDONLY), EACCES);
	EXPECT_ERR(open(at("mine"), O_RDONLY), EACCES);
	/* The owner of a file: its own bits. */
	int fd = open(at("other-owned"), O_RDONLY);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	EXPECT_ERR(open(at("other-owned"), O_WRONLY), EACCES);
	EXPECT_ERR(kill(getppid(), 0), EPERM);
	EXPECT_ERR(setuid(0), EPERM);
}

static void euid_and_fsuid(void)
{
	struct sets full = get();
	/* The file-system uid takes the file-system capabilities with it. */
	EXPECT(setfsuid(1234), 0);
	struct sets s = get();
	EXPECT_TRUE(!(s.eff & BIT(CAP_DAC_OVERRIDE)) && !(s.eff & BIT(CAP_CHOWN)));
	EXPECT_TRUE(s.eff & BIT(CAP_KILL));
	EXPECT_TRUE(s.prm == full.prm);
	EXPECT_ERR(open(at("zero"), O_RDONLY), EACCES);
	/* New files are the file-system uid's. */
	int fd = open(at("sticky/by-fsuid"), O_CREAT | O_WRONLY, 0600);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	EXPECT(uid_of(at("sticky/by-fsuid")), 1234);
	EXPECT(setfsuid(0), 1234);
	EXPECT_TRUE(get().eff == full.eff);
	fd = open(at("zero"), O_RDONLY);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	/* The effective uid: the effective set goes and comes back. */
	EXPECT(seteuid(1234), 0);
	EXPECT_TRUE(get().eff == 0 && get().prm == full.prm);
	EXPECT_ERR(open(at("zero"), O_RDONLY), EACCES);
	EXPECT(seteuid(0), 0);
	EXPECT_TRUE(get().eff == full.prm);
	fd = open(at("zero"), O_RDONLY);
	EXPECT_TRUE(fd >= 0);
	close(fd);
}

static void make(const char *name, int mode, int uid, int gid)
{
	int fd = open(at(name), O_CREAT | O_WRONLY | O_TRUNC, 0600);
	if (fd < 0 || fchown(fd, uid, gid) != 0 || fchmod(fd, mode) != 0)
		SHOW("setup of %s failed: %s", name, errname(errno));
	close(fd);
}

static void make_script(const char *name, int mode)
{
	int fd = open(at(name), O_CREAT | O_WRONLY | O_TRUNC, 0600);
	if (fd < 0 || write(fd, "#!/nonexistent/sh\n", 18) != 18 || fchown(fd, 1234, 54321) != 0 ||
	    fchmod(fd, mode) != 0)
		SHOW("setup of %s failed: %s", name, errname(errno));
	close(fd);
}

static void cleanup(void)
{
	const char *names[] = {"zero", "mine", "theirs", "theirs-x", "group-r", "other-w",
			       "scratch", "sgid", "other-owned", "suid", "sgid-nox", "suid-chown",
			       "sgidx-chown", "script", "script-nox",
			       "sticky/by-fsuid", "sticky/f",
			       "sticky/own", NULL};
	for (int i = 0; names[i]; i++)
		unlink(at(names[i]));
	rmdir(at("closed"));
	rmdir(at("sticky"));
	rmdir(dir);
}

int main(void)
{
	EXPECT(getuid(), 0);
	struct sets s = get();
	EXPECT_TRUE(s.eff == s.prm);
	strcpy(dir, "/tmp/capchk.XXXXXX");
	if (!mkdtemp(dir)) {
		SHOW("mkdtemp: %s", errname(errno));
		return 1;
	}
	/* Others (uid 1234) walk through it. */
	chmod(dir, 0755);
	make("zero", 0, 0, 0);
	make("mine", 0600, 0, 0);
	make("theirs", 0600, 1234, 54321);
	make("theirs-x", 0100, 1234, 54321);
	make("group-r", 0040, 1234, 0);
	make("other-w", 0602, 1234, 54321);
	make("scratch", 0644, 0, 0);
	make("sgid", 0755, 0, 54321);
	make("other-owned", 0400, 1234, 54321);
	make("suid", 06755, 0, 0);
	make("sgid-nox", 02640, 0, 0);
	make("suid-chown", 06740, 0, 0);
	make("sgidx-chown", 02710, 0, 0);
	make_script("script", 0700);
	make_script("script-nox", 0600);
	mkdir(at("closed"), 0);
	mkdir(at("sticky"), 0777);
	make("sticky/f", 0644, 1235, 54321);
	make("sticky/own", 0644, 0, 0);
	chown(at("sticky"), 1234, 54321);
	chmod(at("sticky"), 01777);

	in_child("full set", full_caps_files);
	in_child("CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH", dac_override);
	in_child("CAP_CHOWN", chown_cap);
	in_child("CAP_CHOWN held", chown_with_cap);
	in_child("CAP_FOWNER", fowner);
	in_child("CAP_FOWNER held", fowner_with_cap);
	in_child("CAP_FSETID", fsetid);
	in_child("trusted.* and CAP_SYS_ADMIN", xattr_admin);

	/* A process of another uid, waiting to be killed. */
	int p[2];
	EXPECT(pipe(p), 0);
	fflush(stdout);
	other = fork();
	if (other == 0) {
		close(p[0]);
		if (setresuid(1234, 1234, 1234) != 0)
			_exit(3);
		if (write(p[1], "x", 1) != 1)
			_exit(3);
		for (;;)
			pause();
	}
	close(p[1]);
	char b;
	EXPECT(read(p[0], &b, 1), 1);
	close(p[0]);
	in_child("CAP_KILL", kill_cap);
	EXPECT(kill(other, SIGKILL), 0);
	int st;
	EXPECT_TRUE(waitpid(other, &st, 0) == other && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

	in_child("CAP_SETUID", setuid_cap);
	in_child("CAP_SETGID", setgid_cap);
	in_child("CAP_SYS_ADMIN", sys_admin);
	in_child("CAP_SYS_CHROOT", sys_chroot);
	in_child("CAP_SYS_CHROOT held", sys_chroot_with_cap);
	in_child("CAP_SYS_NICE", sys_nice);
	in_child("CAP_SYS_RESOURCE", sys_resource);
	in_child("CAP_NET_BIND_SERVICE", net_bind);
	in_child("PR_SET_KEEPCAPS", keepcaps);
	in_child("leaving uid 0", no_keepcaps);
	in_child("setfsuid and seteuid", euid_and_fsuid);

	cleanup();
	return t_done();
}
