/* More /proc/sys files (issue 20): kernel/{tainted,version,printk,
 * overflowuid,overflowgid,ns_last_pid}, fs/inotify/*, fs/pipe-user-pages-*,
 * fs/protected_*, vm/vfs_cache_pressure in Linux's formats; inotify's
 * max_queued_events is the bound a queue keeps; the IPC namespace's
 * limits (kernel.shm*, msg*, sem, fs.mqueue.*) and ns_last_pid written
 * by root change what the kernel enforces, and are refused to others.
 * Writes happen only in namespaces of the guest's own: natively a new IPC
 * (or PID) namespace, in the sandbox (which makes no new namespaces:
 * EINVAL, as a kernel built without them) its own. */
#include "t.h"
#include <dirent.h>
#include <mqueue.h>
#include <sched.h>
#include <sys/inotify.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/utsname.h>

static char buf[65536];

static long slurp(const char *path)
{
	long n = t_slurp(path, buf, sizeof buf);
	if (n < 0)
		SHOW("%s: errno=%s", path, errname(errno));
	return n;
}

/* One decimal number and a newline, in [lo, hi]. */
static int number_ok(const char *s, long lo, long hi)
{
	char *end;
	long v = strtol(s, &end, 10);
	return end != s && !strcmp(end, "\n") && v >= lo && v <= hi;
}

static long number(const char *path)
{
	return slurp(path) > 0 ? strtol(buf, NULL, 10) : -1;
}

/* write(2) of `s` to `path`: its result, or -1 with errno. */
static long put(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	long r = write(fd, s, strlen(s));
	int e = errno;
	close(fd);
	errno = e;
	return r;
}

/* The file's contents with tabs as '|' (for printing). */
static const char *show(const char *path)
{
	if (slurp(path) < 0)
		return "?";
	for (char *p = buf; *p; p++)
		if (*p == '\t')
			*p = '|';
	buf[strcspn(buf, "\n")] = 0;
	return buf;
}

/* Runs `fn` in a child; its status (0: all its checks passed). */
static int in_child(void (*fn)(void))
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		t_failures = 0;
		fn();
		fflush(stdout);
		_exit(t_failures ? 1 : 0);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Natively a new namespace of `flag` for the writes; the sandbox makes
 * none, and its own namespaces are the guest's to change. Anything else
 * would change the host's: stop. */
static void own_namespace(int flag)
{
	if (unshare(flag) != 0 && errno != EINVAL) {
		SHOW("cannot unshare: %s", errname(errno));
		fflush(stdout);
		_exit(3);
	}
}

static void unprivileged(void)
{
	EXPECT(setgid(65534), 0);
	EXPECT(setuid(65534), 0);
	/* The IPC namespace's files are its root's (0644 for uid 0 only),
	 * the global ones root's; ns_last_pid opens (0666) but its write asks
	 * for CAP_SYS_ADMIN. */
	EXPECT_ERR(open("/proc/sys/kernel/shmmni", O_WRONLY), EACCES);
	EXPECT_ERR(open("/proc/sys/kernel/sem", O_RDWR), EACCES);
	EXPECT_ERR(open("/proc/sys/fs/mqueue/msg_max", O_WRONLY), EACCES);
	EXPECT_ERR(open("/proc/sys/kernel/tainted", O_WRONLY), EACCES);
	EXPECT_ERR(open("/proc/sys/fs/pipe-max-size", O_WRONLY), EACCES);
	EXPECT_ERR(put("/proc/sys/kernel/ns_last_pid", "100\n"), EPERM);
	EXPECT_TRUE(slurp("/proc/sys/kernel/shmmni") > 0);
}

static void ipc_limits(void)
{
	own_namespace(CLONE_NEWIPC);
	/* A new IPC namespace's limits: Linux's defaults. */
	SHOW("shmmni %s", show("/proc/sys/kernel/shmmni"));
	SHOW("shmmax %s", show("/proc/sys/kernel/shmmax"));
	SHOW("shmall %s", show("/proc/sys/kernel/shmall"));
	SHOW("msgmax %s", show("/proc/sys/kernel/msgmax"));
	SHOW("msgmnb %s", show("/proc/sys/kernel/msgmnb"));
	SHOW("msgmni %s", show("/proc/sys/kernel/msgmni"));
	SHOW("sem %s", show("/proc/sys/kernel/sem"));
	SHOW("mqueue %s %s %s %s %s", show("/proc/sys/fs/mqueue/msg_max"),
	     show("/proc/sys/fs/mqueue/msgsize_max"), show("/proc/sys/fs/mqueue/msg_default"),
	     show("/proc/sys/fs/mqueue/msgsize_default"), show("/proc/sys/fs/mqueue/queues_max"));

	/* shmmni: the most segments. */
	EXPECT(put("/proc/sys/kernel/shmmni", "1\n"), 2);
	SHOW("shmmni now %s", show("/proc/sys/kernel/shmmni"));
	int a = shmget(IPC_PRIVATE, 4096, 0600);
	EXPECT_TRUE(a >= 0);
	EXPECT_ERR(shmget(IPC_PRIVATE, 4096, 0600), ENOSPC);
	struct shminfo si;
	EXPECT_OK(shmctl(0, IPC_INFO, (struct shmid_ds *)&si));
	EXPECT(si.shmmni, 1);
	EXPECT(shmctl(a, IPC_RMID, NULL), 0);
	EXPECT(put("/proc/sys/kernel/shmmni", "4096"), 4);
	/* shmmax: the largest segment; shmall: pages in all. */
	EXPECT(put("/proc/sys/kernel/shmmax", "8192\n"), 5);
	EXPECT_ERR(shmget(IPC_PRIVATE, 8193, 0600), EINVAL);
	EXPECT_OK(a = shmget(IPC_PRIVATE, 8192, 0600));
	EXPECT(shmctl(a, IPC_RMID, NULL), 0);
	EXPECT_ERR(put("/proc/sys/kernel/shmmax", "-1"), EINVAL);
	EXPECT(put("/proc/sys/kernel/shmall", "1"), 1);
	EXPECT_ERR(shmget(IPC_PRIVATE, 8192, 0600), ENOSPC);
	EXPECT_OK(a = shmget(IPC_PRIVATE, 4096, 0600));
	EXPECT(shmctl(a, IPC_RMID, NULL), 0);

	/* msgmax, msgmnb, msgmni. */
	EXPECT(put("/proc/sys/kernel/msgmax", "100"), 3);
	EXPECT(put("/proc/sys/kernel/msgmnb", "200"), 3);
	int q = msgget(IPC_PRIVATE, 0600);
	EXPECT_TRUE(q >= 0);
	struct {
		long type;
		char text[200];
	} m = {1, {0}};
	EXPECT_ERR(msgsnd(q, &m, 101, IPC_NOWAIT), EINVAL);
	EXPECT(msgsnd(q, &m, 100, IPC_NOWAIT), 0);
	struct msqid_ds ds;
	EXPECT(msgctl(q, IPC_STAT, &ds), 0);
	EXPECT(ds.msg_qbytes, 200);
	struct msginfo mi;
	EXPECT_OK(msgctl(0, IPC_INFO, (struct msqid_ds *)&mi));
	EXPECT_TRUE(mi.msgmax == 100 && mi.msgmnb == 200);
	EXPECT(put("/proc/sys/kernel/msgmni", "0"), 1);
	EXPECT_ERR(msgget(IPC_PRIVATE, 0600), ENOSPC);
	EXPECT(msgctl(q, IPC_RMID, NULL), 0);
	EXPECT_ERR(put("/proc/sys/kernel/msgmni", "32769"), EINVAL);
	EXPECT_ERR(put("/proc/sys/kernel/msgmax", "2147483648"), EINVAL);

	/* sem: SEMMSL SEMMNS SEMOPM SEMMNI, as many as are given. */
	EXPECT(put("/proc/sys/kernel/sem", "10 100\t5 1\n"), 11);
	SHOW("sem now %s", show("/proc/sys/kernel/sem"));
	EXPECT_ERR(semget(IPC_PRIVATE, 11, 0600), EINVAL);
	int s = semget(IPC_PRIVATE, 10, 0600);
	EXPECT_TRUE(s >= 0);
	EXPECT_ERR(semget(IPC_PRIVATE, 1, 0600), ENOSPC);
	struct sembuf ops[6] = {{0, 1, 0}, {0, 1, 0}, {0, 1, 0}, {0, 1, 0}, {0, 1, 0}, {0, 1, 0}};
	EXPECT_ERR(semop(s, ops, 6), E2BIG);
	EXPECT(semop(s, ops, 5), 0);
	EXPECT(semctl(s, 0, IPC_RMID), 0);
	EXPECT(put("/proc/sys/kernel/sem", "3"), 1);
	SHOW("sem now %s", show("/proc/sys/kernel/sem"));
	/* Values before a refused one stay; a bad SEMMNI alone goes back. */
	EXPECT_ERR(put("/proc/sys/kernel/sem", "1 2 3 40000"), ERANGE);
	SHOW("sem now %s", show("/proc/sys/kernel/sem"));
	EXPECT_ERR(put("/proc/sys/kernel/sem", "4 5 x"), EINVAL);
	SHOW("sem now %s", show("/proc/sys/kernel/sem"));
	EXPECT_ERR(put("/proc/sys/kernel/sem", "abc"), EINVAL);
	EXPECT_ERR(put("/proc/sys/kernel/sem", " \n"), EINVAL);
	EXPECT_ERR(put("/proc/sys/kernel/sem", "7x"), EINVAL);
	SHOW("sem now %s", show("/proc/sys/kernel/sem"));
	/* C's notation, and nothing done past position 0. */
	EXPECT(put("/proc/sys/kernel/shmmni", "0x10"), 4);
	SHOW("shmmni now %s", show("/proc/sys/kernel/shmmni"));
	int fd = open("/proc/sys/kernel/shmmni", O_WRONLY);
	EXPECT(pwrite(fd, "5", 1, 1), 1);
	EXPECT(write(fd, "010", 3), 3);
	EXPECT(write(fd, "5", 1), 1);
	close(fd);
	SHOW("shmmni now %s", show("/proc/sys/kernel/shmmni"));
	EXPECT(put("/proc/sys/kernel/shmmni", ""), 0);

	/* fs.mqueue: msg_default sizes a queue made without attributes. */
	EXPECT(put("/proc/sys/fs/mqueue/msg_default", "3"), 1);
	EXPECT(put("/proc/sys/fs/mqueue/msgsize_default", "256"), 3);
	char name[64];
	snprintf(name, sizeof name, "/proc_sys_more.%d", getpid());
	mqd_t mq = mq_open(name, O_CREAT | O_RDWR, 0600, NULL);
	EXPECT_TRUE(mq != (mqd_t)-1);
	struct mq_attr at;
	EXPECT(mq_getattr(mq, &at), 0);
	EXPECT_TRUE(at.mq_maxmsg == 3 && at.mq_msgsize == 256);
	mq_close(mq);
	EXPECT(mq_unlink(name), 0);
	EXPECT_ERR(put("/proc/sys/fs/mqueue/msg_max", "0"), EINVAL);
	EXPECT_ERR(put("/proc/sys/fs/mqueue/msgsize_max", "127"), EINVAL);
	EXPECT(put("/proc/sys/fs/mqueue/queues_max", "-5"), 2);
	SHOW("queues_max now %s", show("/proc/sys/fs/mqueue/queues_max"));
}

static void last_pid_in_own_namespace(void)
{
	/* The reader's PID namespace: the next PID after the one written. */
	EXPECT(put("/proc/sys/kernel/ns_last_pid", "5000\n"), 5);
	EXPECT(number("/proc/sys/kernel/ns_last_pid"), 5000);
	fflush(stdout);
	pid_t c = fork();
	if (c == 0)
		_exit(0);
	EXPECT(c, 5001);
	EXPECT(waitpid(c, NULL, 0), 5001);
	EXPECT(number("/proc/sys/kernel/ns_last_pid"), 5001);
	EXPECT_ERR(put("/proc/sys/kernel/ns_last_pid", "-1"), EINVAL);
	EXPECT_ERR(put("/proc/sys/kernel/ns_last_pid", "4194305"), EINVAL);
}

static void last_pid(void)
{
	own_namespace(CLONE_NEWPID);
	/* Natively the new namespace's first process is this child. */
	EXPECT(in_child(last_pid_in_own_namespace), 0);
}

int main(void)
{
	struct utsname u;
	EXPECT(uname(&u), 0);
	char want[512];

	/* kernel/: version is what uname -v says. */
	EXPECT_TRUE(slurp("/proc/sys/kernel/tainted") > 0 && number_ok(buf, 0, LONG_MAX));
	EXPECT_TRUE(slurp("/proc/sys/kernel/version") > 0);
	snprintf(want, sizeof want, "%s\n", u.version);
	EXPECT_TRUE(!strcmp(buf, want));
	EXPECT_TRUE(!strncmp(buf, "#", 1) && strstr(buf, " SMP "));
	/* printk: four levels, tab-separated. */
	EXPECT_TRUE(slurp("/proc/sys/kernel/printk") > 0);
	int lv[4], used = 0;
	EXPECT(sscanf(buf, "%d\t%d\t%d\t%d%n", &lv[0], &lv[1], &lv[2], &lv[3], &used), 4);
	EXPECT_TRUE(!strcmp(buf + used, "\n") && strchr(buf, '\t') && !strchr(buf, ' '));
	EXPECT_TRUE(lv[0] >= 0 && lv[0] <= 15 && lv[2] >= 1 && lv[3] >= 1);
	SHOW("overflowuid %ld overflowgid %ld", number("/proc/sys/kernel/overflowuid"),
	     number("/proc/sys/kernel/overflowgid"));
	/* ns_last_pid: the last PID handed out, which a fork moves on. */
	long before = number("/proc/sys/kernel/ns_last_pid");
	EXPECT_TRUE(number_ok(buf, 1, 4194304));
	fflush(stdout);
	pid_t c = fork();
	if (c == 0)
		_exit(0);
	long after = number("/proc/sys/kernel/ns_last_pid");
	EXPECT_TRUE(after != before && number_ok(buf, 1, 4194304));
	EXPECT_TRUE(waitpid(c, NULL, 0) == c);

	/* fs/ and vm/. */
	EXPECT_TRUE(slurp("/proc/sys/fs/inotify/max_user_instances") > 0 &&
		    number_ok(buf, 1, INT_MAX));
	EXPECT_TRUE(slurp("/proc/sys/fs/inotify/max_user_watches") > 0 &&
		    number_ok(buf, 1, INT_MAX));
	long max_events = number("/proc/sys/fs/inotify/max_queued_events");
	EXPECT_TRUE(number_ok(buf, 1, INT_MAX));
	EXPECT_TRUE(slurp("/proc/sys/fs/pipe-user-pages-soft") > 0 && number_ok(buf, 0, LONG_MAX));
	EXPECT_TRUE(slurp("/proc/sys/fs/pipe-user-pages-hard") > 0 && number_ok(buf, 0, LONG_MAX));
	EXPECT_TRUE(slurp("/proc/sys/fs/protected_hardlinks") > 0 && number_ok(buf, 0, 1));
	EXPECT_TRUE(slurp("/proc/sys/fs/protected_symlinks") > 0 && number_ok(buf, 0, 1));
	EXPECT_TRUE(slurp("/proc/sys/fs/protected_fifos") > 0 && number_ok(buf, 0, 2));
	EXPECT_TRUE(slurp("/proc/sys/fs/protected_regular") > 0 && number_ok(buf, 0, 2));
	EXPECT_TRUE(slurp("/proc/sys/vm/vfs_cache_pressure") > 0 && number_ok(buf, 0, INT_MAX));
	DIR *d = opendir("/proc/sys/fs/inotify");
	int seen = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		seen += !strncmp(e->d_name, "max_", 4);
	EXPECT(seen, 3);
	if (d)
		closedir(d);
	d = opendir("/proc/sys/kernel");
	seen = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		seen += !strcmp(e->d_name, "ns_last_pid") || !strcmp(e->d_name, "tainted") ||
			!strcmp(e->d_name, "version") || !strcmp(e->d_name, "printk") ||
			!strcmp(e->d_name, "overflowuid") || !strcmp(e->d_name, "shmmni");
	EXPECT(seen, 6);
	if (d)
		closedir(d);

	/* max_queued_events is where an inotify queue overflows: one
	 * IN_Q_OVERFLOW after that many events (open and close alternate, so
	 * none merge). */
	if (max_events > 0 && max_events <= 65536) {
		int in = inotify_init1(IN_NONBLOCK);
		char path[64];
		snprintf(path, sizeof path, "/tmp/proc_sys_more.%d", getpid());
		int f = open(path, O_CREAT | O_WRONLY, 0600);
		close(f);
		EXPECT_TRUE(inotify_add_watch(in, path, IN_OPEN | IN_CLOSE_NOWRITE) > 0);
		for (long i = 0; i < max_events / 2 + 8; i++)
			close(open(path, O_RDONLY));
		long events = 0, overflows = 0, last_wd = 0;
		static char ev[1 << 16];
		for (long n; (n = read(in, ev, sizeof ev)) > 0;)
			for (char *p = ev; p < ev + n;) {
				struct inotify_event *e = (struct inotify_event *)p;
				events++;
				overflows += !!(e->mask & IN_Q_OVERFLOW);
				last_wd = e->wd;
				p += sizeof *e + e->len;
			}
		EXPECT_TRUE(events == max_events + 1);
		EXPECT(overflows, 1);
		EXPECT(last_wd, -1);
		close(in);
		unlink(path);
	}

	EXPECT(in_child(unprivileged), 0);
	EXPECT(in_child(ipc_limits), 0);
	EXPECT(in_child(last_pid), 0);
	return t_done();
}
