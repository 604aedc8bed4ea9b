/* A guest's own seccomp (seccomp(2), prctl(PR_SET_SECCOMP)): the privilege
 * rule, the kernel's program checks, every action and which of several
 * filters wins, what seccomp_data holds, the classic BPF operations as the
 * kernel computes them, inheritance across fork and execve, strict mode,
 * and TSYNC. Each filter is installed in a child, so that the next test
 * starts unfiltered. */
#include "t.h"
#include <pthread.h>
#include <stddef.h>
#include <ucontext.h>
#include <sys/prctl.h>
#include <sys/utsname.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#ifndef SYS_SECCOMP
#define SYS_SECCOMP 1 /* si_code of a seccomp SIGSYS */
#endif
/* link: -pthread */

#define SELF GUEST_DIR "/seccomp_filter"
#define LEN(a) (sizeof(a) / sizeof((a)[0]))

#define LD(off) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))
#define LD_NR LD(offsetof(struct seccomp_data, nr))
#define LD_ARG(n) LD(offsetof(struct seccomp_data, args) + 8 * (n))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))
#define ALLOW RET(SECCOMP_RET_ALLOW)
/* if nr == n: return v */
#define ON(n, v) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (n), 0, 1), RET(v)

static long install(struct sock_filter *f, unsigned short n, unsigned flags)
{
	struct sock_fprog p = {.len = n, .filter = f};
	return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &p);
}

#define INSTALL(f) install((f), LEN(f), 0)

/* A numeric field of a /proc status file, -1 if absent. */
static long status_of(const char *path, const char *key)
{
	char buf[4096];
	if (t_slurp(path, buf, sizeof buf) < 0)
		return -1;
	for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, key, strlen(key)) && l[strlen(key)] == ':')
			return strtol(l + strlen(key) + 1, NULL, 0);
	return -1;
}

#define SELF_STATUS(key) status_of("/proc/self/status", key)

/* Runs fn in a child process; its wait status. */
static int in_child(void (*fn)(void))
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		fn();
		fflush(stdout);
		_exit(t_failures ? 1 : 0);
	}
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return st;
}

#define run in_child

static int EXITED_0(int st)
{
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int KILLED_BY(int st, int sig)
{
	return WIFSIGNALED(st) && WTERMSIG(st) == sig;
}

static struct sock_filter allow_all[] = {ALLOW};

/* --- privilege ------------------------------------------------------- */

static int has_sys_admin(void)
{
	char buf[4096];
	if (t_slurp("/proc/self/status", buf, sizeof buf) < 0)
		return 0;
	char *l = strstr(buf, "CapEff:");
	return l && (strtoull(l + 7, NULL, 16) >> 21 & 1);
}

static void unprivileged(void)
{
	EXPECT(setgid(65534), 0);
	EXPECT(setuid(65534), 0);
	EXPECT(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), 0);
	/* Without no_new_privs or CAP_SYS_ADMIN a filter could fool a
	 * set-user-ID program the process runs next. */
	EXPECT_ERR(INSTALL(allow_all), EACCES);
	EXPECT(prctl(PR_GET_SECCOMP), 0);
	EXPECT(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	EXPECT(INSTALL(allow_all), 0);
	EXPECT(prctl(PR_GET_SECCOMP), 2);
}

static void admin_without_nnp(void)
{
	/* Root's CAP_SYS_ADMIN is enough (whether this root has it depends
	 * on the host: only the agreement is printed). */
	int admin = has_sys_admin();
	errno = 0;
	long r = INSTALL(allow_all);
	EXPECT_TRUE(admin ? r == 0 : (r == -1 && errno == EACCES));
}

/* --- what the kernel refuses to load --------------------------------- */

static struct sock_filter too_long[BPF_MAXINSNS + 1];

static void refused_programs(void)
{
	struct sock_fprog p = {.len = 0, .filter = allow_all};
	EXPECT_ERR(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p), EINVAL);
	for (int i = 0; i < BPF_MAXINSNS + 1; i++)
		too_long[i] = (struct sock_filter)ALLOW;
	EXPECT_ERR(install(too_long, BPF_MAXINSNS + 1, 0), EINVAL);
	p.len = 1;
	p.filter = NULL;
	EXPECT_ERR(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p), EINVAL);
	p.filter = BADPTR;
	EXPECT_ERR(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p), EFAULT);
	EXPECT_ERR(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, BADPTR), EFAULT);
	EXPECT_ERR(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, NULL), EFAULT);

	/* Jumps go forward and stay inside; a program ends in a return. */
	struct sock_filter past_end[] = {LD_NR, BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0), ALLOW};
	EXPECT_ERR(INSTALL(past_end), EINVAL);
	struct sock_filter false_past_end[] = {LD_NR, BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 0, 0, 5), ALLOW};
	EXPECT_ERR(INSTALL(false_past_end), EINVAL);
	struct sock_filter ja_past_end[] = {BPF_STMT(BPF_JMP | BPF_JA, 1), ALLOW};
	EXPECT_ERR(INSTALL(ja_past_end), EINVAL);
	/* (a "backward" jump: the offset wraps around) */
	struct sock_filter ja_back[] = {ALLOW, BPF_STMT(BPF_JMP | BPF_JA, 0xfffffffe), ALLOW};
	EXPECT_ERR(INSTALL(ja_back), EINVAL);
	struct sock_filter no_ret[] = {ALLOW, LD_NR};
	EXPECT_ERR(INSTALL(no_ret), EINVAL);
	struct sock_filter ret_x[] = {BPF_STMT(BPF_RET | BPF_X, 0)};
	EXPECT_ERR(INSTALL(ret_x), EINVAL);

	/* Opcodes: unknown, or classic BPF that seccomp leaves out. */
	struct sock_filter bad_op[] = {BPF_STMT(0xffff, 0), ALLOW};
	EXPECT_ERR(INSTALL(bad_op), EINVAL);
	struct sock_filter mod[] = {LD_NR, BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, 3), ALLOW};
	EXPECT_ERR(INSTALL(mod), EINVAL);
	struct sock_filter half[] = {BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 0), ALLOW};
	EXPECT_ERR(INSTALL(half), EINVAL);
	struct sock_filter ind[] = {BPF_STMT(BPF_LD | BPF_W | BPF_IND, 0), ALLOW};
	EXPECT_ERR(INSTALL(ind), EINVAL);
	struct sock_filter div0[] = {LD_NR, BPF_STMT(BPF_ALU | BPF_DIV | BPF_K, 0), ALLOW};
	EXPECT_ERR(INSTALL(div0), EINVAL);
	struct sock_filter shift32[] = {LD_NR, BPF_STMT(BPF_ALU | BPF_LSH | BPF_K, 32), ALLOW};
	EXPECT_ERR(INSTALL(shift32), EINVAL);

	/* Loads: whole aligned words of seccomp_data. */
	struct sock_filter misaligned[] = {LD(2), ALLOW};
	EXPECT_ERR(INSTALL(misaligned), EINVAL);
	struct sock_filter outside[] = {LD(64), ALLOW};
	EXPECT_ERR(INSTALL(outside), EINVAL);

	/* Scratch memory: 16 words, each written before it is read on every
	 * path. */
	struct sock_filter word16[] = {BPF_STMT(BPF_ST, 16), ALLOW};
	EXPECT_ERR(INSTALL(word16), EINVAL);
	struct sock_filter unset[] = {BPF_STMT(BPF_LD | BPF_MEM, 3), ALLOW};
	EXPECT_ERR(INSTALL(unset), EINVAL);
	struct sock_filter one_path[] = {
		LD_NR, BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1), BPF_STMT(BPF_ST, 3),
		BPF_STMT(BPF_LD | BPF_MEM, 3), ALLOW,
	};
	EXPECT_ERR(INSTALL(one_path), EINVAL);

	/* Flags and operations. */
	EXPECT_ERR(install(allow_all, 1, 1 << 6), EINVAL);
	EXPECT_ERR(install(allow_all, 1, SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV), EINVAL);
	EXPECT_ERR(install(allow_all, 1, SECCOMP_FILTER_FLAG_TSYNC | SECCOMP_FILTER_FLAG_NEW_LISTENER),
		   EINVAL);
	EXPECT_ERR(syscall(SYS_seccomp, 9, 0, NULL), EINVAL);
	EXPECT_ERR(syscall(SYS_seccomp, SECCOMP_SET_MODE_STRICT, 1, NULL), EINVAL);
	EXPECT_ERR(syscall(SYS_seccomp, SECCOMP_SET_MODE_STRICT, 0, allow_all), EINVAL);
	EXPECT_ERR(prctl(PR_SET_SECCOMP, 3, 0, 0, 0), EINVAL);
	EXPECT_ERR(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, NULL, 0, 0), EFAULT);
	/* Nothing of that was installed. */
	EXPECT(prctl(PR_GET_SECCOMP), 0);
	EXPECT(SELF_STATUS("Seccomp_filters"), 0);
}

static void actions_avail(void)
{
	static const struct {
		const char *name;
		unsigned action;
	} actions[] = {
		{"KILL_PROCESS", SECCOMP_RET_KILL_PROCESS}, {"KILL_THREAD", SECCOMP_RET_KILL_THREAD},
		{"TRAP", SECCOMP_RET_TRAP},		    {"ERRNO", SECCOMP_RET_ERRNO},
		{"USER_NOTIF", SECCOMP_RET_USER_NOTIF},	    {"TRACE", SECCOMP_RET_TRACE},
		{"LOG", SECCOMP_RET_LOG},		    {"ALLOW", SECCOMP_RET_ALLOW},
	};
	for (unsigned i = 0; i < LEN(actions); i++) {
		unsigned a = actions[i].action;
		errno = 0;
		long r = syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &a);
		SHOW("action %s available: %s", actions[i].name, r == 0 ? "yes" : errname(errno));
		if (r != 0)
			t_fail("available");
	}
	unsigned a = SECCOMP_RET_ERRNO | 1;
	EXPECT_ERR(syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &a), EOPNOTSUPP);
	a = 0x00010000;
	EXPECT_ERR(syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &a), EOPNOTSUPP);
	a = SECCOMP_RET_ALLOW;
	EXPECT_ERR(syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 1, &a), EINVAL);
	EXPECT_ERR(syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, BADPTR), EFAULT);
	struct seccomp_notif_sizes sz = {0};
	EXPECT(syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz), 0);
	SHOW("notif sizes: %u %u %u", sz.seccomp_notif, sz.seccomp_notif_resp, sz.seccomp_data);
	EXPECT_ERR(syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 1, &sz), EINVAL);
	EXPECT_ERR(syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, BADPTR), EFAULT);
}

/* --- ERRNO, and what the other non-killing actions do ---------------- */

static struct sock_filter errno_filter[] = {
	LD(offsetof(struct seccomp_data, arch)),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
	RET(SECCOMP_RET_KILL_PROCESS),
	LD_NR,
	ON(SYS_getpid, SECCOMP_RET_ERRNO | EPERM),
	ON(SYS_uname, SECCOMP_RET_ERRNO | EPERM),
	ON(SYS_getuid, SECCOMP_RET_ERRNO | 5000),
	ON(SYS_getppid, SECCOMP_RET_ERRNO | 0),
	ON(SYS_geteuid, SECCOMP_RET_TRACE | 1),
	ON(SYS_getegid, SECCOMP_RET_USER_NOTIF),
	ON(SYS_getgid, SECCOMP_RET_LOG),
	/* fcntl(fd, F_GETFL) only: an argument */
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fcntl, 0, 3),
	LD_ARG(1),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, F_GETFL, 0, 1),
	RET(SECCOMP_RET_ERRNO | E2BIG),
	ALLOW,
};

static void errno_grandchild(void)
{
	EXPECT(prctl(PR_GET_SECCOMP), 2);
	EXPECT(SELF_STATUS("Seccomp_filters"), 1);
	EXPECT_ERR(syscall(SYS_getpid), EPERM);
}

static void errno_actions(void)
{
	EXPECT(INSTALL(errno_filter), 0);
	EXPECT(prctl(PR_GET_SECCOMP), 2);
	EXPECT(SELF_STATUS("Seccomp"), 2);
	EXPECT(SELF_STATUS("Seccomp_filters"), 1);
	EXPECT(SELF_STATUS("NoNewPrivs"), 1);
	EXPECT_ERR(syscall(SYS_getpid), EPERM);
	struct utsname u;
	EXPECT_ERR(uname(&u), EPERM);
	/* (errnos are capped at 4095) */
	EXPECT_ERR(syscall(SYS_getuid), 4095);
	/* ERRNO with 0: success, but the call is not made */
	EXPECT(syscall(SYS_getppid), 0);
	/* TRACE without a tracer, USER_NOTIF without a listener: ENOSYS */
	EXPECT_ERR(syscall(SYS_geteuid), ENOSYS);
	EXPECT_ERR(syscall(SYS_getegid), ENOSYS);
	EXPECT(syscall(SYS_getgid), 0);
	EXPECT_ERR(fcntl(1, F_GETFL), E2BIG);
	EXPECT(fcntl(1, F_GETFD), 0);
	/* strict mode cannot follow filters */
	EXPECT_ERR(prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0), EINVAL);
	/* inherited by fork */
	int st = run(errno_grandchild);
	EXPECT_TRUE(EXITED_0(st));
}

/* --- kept across execve ---------------------------------------------- */

static int after_exec(void)
{
	EXPECT(prctl(PR_GET_SECCOMP), 2);
	EXPECT(SELF_STATUS("Seccomp_filters"), 1);
	EXPECT(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), 1);
	EXPECT_ERR(syscall(SYS_getpid), EPERM);
	EXPECT_TRUE(syscall(SYS_getppid) > 0);
	return t_done();
}

static void exec_keeps_filters(void)
{
	struct sock_filter f[] = {LD_NR, ON(SYS_getpid, SECCOMP_RET_ERRNO | EPERM), ALLOW};
	EXPECT(INSTALL(f), 0);
	fflush(stdout);
	char *argv[] = {SELF, "after-exec", NULL};
	char *envp[] = {NULL};
	execve(SELF, argv, envp);
	SHOW("execve failed: %s", errname(errno));
	t_fail("execve");
}

static void *exec_self(void *arg)
{
	(void)arg;
	char *argv[] = {SELF, "after-exec", NULL};
	char *envp[] = {NULL};
	execve(SELF, argv, envp);
	SHOW("execve failed: %s", errname(errno));
	t_fail("execve");
	return NULL;
}

static void exec_from_a_thread(void)
{
	/* the thread that execs takes the process over, filters and all */
	struct sock_filter f[] = {LD_NR, ON(SYS_getpid, SECCOMP_RET_ERRNO | EPERM), ALLOW};
	EXPECT(install(f, LEN(f), SECCOMP_FILTER_FLAG_TSYNC), 0);
	fflush(stdout);
	pthread_t t;
	pthread_create(&t, NULL, exec_self, NULL);
	pthread_join(t, NULL);
	SHOW("not reached");
}

/* --- stacked filters: the most restrictive wins ---------------------- */

static struct sock_filter older[] = {
	LD_NR,
	ON(SYS_getuid, SECCOMP_RET_ERRNO | E2BIG),
	ON(SYS_getgid, SECCOMP_RET_ALLOW),
	ON(SYS_getppid, SECCOMP_RET_LOG),
	ON(SYS_getpid, SECCOMP_RET_ERRNO | ESRCH),
	ALLOW,
};
static struct sock_filter newer[] = {
	LD_NR,
	ON(SYS_getuid, SECCOMP_RET_ERRNO | EPERM),
	ON(SYS_getgid, SECCOMP_RET_ERRNO | ENOENT),
	ON(SYS_getppid, SECCOMP_RET_ALLOW),
	ALLOW,
};

static void killer_on_top(void)
{
	struct sock_filter f[] = {LD_NR, ON(SYS_getpid, SECCOMP_RET_KILL_PROCESS), ALLOW};
	EXPECT(INSTALL(f), 0);
	EXPECT(SELF_STATUS("Seccomp_filters"), 3);
	SHOW("killer installed");
	fflush(stdout);
	syscall(SYS_getpid);
	SHOW("not reached");
}

static void stacked(void)
{
	EXPECT(INSTALL(older), 0);
	EXPECT_ERR(syscall(SYS_getpid), ESRCH);
	EXPECT(INSTALL(newer), 0);
	EXPECT(SELF_STATUS("Seccomp_filters"), 2);
	/* equal actions: the newest filter's errno */
	EXPECT_ERR(syscall(SYS_getuid), EPERM);
	/* ERRNO beats ALLOW */
	EXPECT_ERR(syscall(SYS_getgid), ENOENT);
	/* LOG beats ALLOW, and makes the call */
	EXPECT_TRUE(syscall(SYS_getppid) > 0);
	EXPECT_ERR(syscall(SYS_getpid), ESRCH);
	/* KILL_PROCESS beats an older ERRNO */
	int st = run(killer_on_top);
	EXPECT_TRUE(KILLED_BY(st, SIGSYS));
}

/* --- TRAP ------------------------------------------------------------ */

static volatile long trap_signo, trap_code, trap_nr, trap_arch, trap_errno, trap_rax, trap_addr_ok;

static void on_sigsys(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	trap_signo = sig;
	trap_code = si->si_code;
	trap_nr = si->si_syscall;
	trap_arch = si->si_arch;
	trap_errno = si->si_errno;
	/* the registers as the call left them: rax is the number again */
	trap_rax = uc->uc_mcontext.gregs[REG_RAX];
	trap_addr_ok = (unsigned long)si->si_call_addr == (unsigned long)uc->uc_mcontext.gregs[REG_RIP];
	/* what the trapped call returns */
	uc->uc_mcontext.gregs[REG_RAX] = 4242;
}

/* close(100) traps; other closes are made */
static struct sock_filter trap_close[] = {
	LD_NR,
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_close, 0, 3),
	LD_ARG(0),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 100, 0, 1),
	RET(SECCOMP_RET_TRAP | 77),
	ALLOW,
};

static void trap_blocked(void)
{
	sigset_t m;
	sigemptyset(&m);
	sigaddset(&m, SIGSYS);
	sigprocmask(SIG_BLOCK, &m, NULL);
	SHOW("SIGSYS blocked");
	fflush(stdout);
	/* a blocked SIGSYS from seccomp is forced: the default action */
	syscall(SYS_close, 100);
	SHOW("not reached");
}

static void trap_ignored(void)
{
	signal(SIGSYS, SIG_IGN);
	SHOW("SIGSYS ignored");
	fflush(stdout);
	syscall(SYS_close, 100);
	SHOW("not reached");
}

static void trap(void)
{
	struct sigaction sa = {0};
	sa.sa_sigaction = on_sigsys;
	sa.sa_flags = SA_SIGINFO;
	EXPECT(sigaction(SIGSYS, &sa, NULL), 0);
	EXPECT(dup2(1, 100), 100);
	EXPECT(INSTALL(trap_close), 0);
	EXPECT(syscall(SYS_close, 100), 4242);
	EXPECT(trap_signo, SIGSYS);
	EXPECT(trap_code, SYS_SECCOMP);
	EXPECT(trap_nr, SYS_close);
	EXPECT(trap_arch, AUDIT_ARCH_X86_64);
	EXPECT(trap_errno, 77);
	EXPECT(trap_rax, SYS_close);
	EXPECT_TRUE(trap_addr_ok);
	/* the call was not made: the descriptor is open */
	EXPECT(fcntl(100, F_GETFD), 0);
	EXPECT(dup2(1, 101), 101);
	EXPECT(close(101), 0);
	int st = run(trap_blocked);
	EXPECT_TRUE(KILLED_BY(st, SIGSYS));
	st = run(trap_ignored);
	EXPECT_TRUE(KILLED_BY(st, SIGSYS));
}

/* --- the killing actions --------------------------------------------- */

static void ignore_sigsys(int sig)
{
	(void)sig;
}

static void kill_process(void)
{
	/* a handler does not save the process */
	signal(SIGSYS, ignore_sigsys);
	struct sock_filter f[] = {LD_NR, ON(SYS_getpid, SECCOMP_RET_KILL_PROCESS), ALLOW};
	EXPECT(INSTALL(f), 0);
	SHOW("calling getpid");
	fflush(stdout);
	syscall(SYS_getpid);
	SHOW("not reached");
}

static void kill_thread_alone(void)
{
	struct sock_filter f[] = {LD_NR, ON(SYS_getpid, SECCOMP_RET_KILL_THREAD), ALLOW};
	EXPECT(INSTALL(f), 0);
	fflush(stdout);
	syscall(SYS_getpid);
	SHOW("not reached");
}

static void unknown_action(void)
{
	struct sock_filter f[] = {LD_NR, ON(SYS_getpid, 0x00010000), ALLOW};
	EXPECT(INSTALL(f), 0);
	fflush(stdout);
	syscall(SYS_getpid);
	SHOW("not reached");
}

static void division_by_zero(void)
{
	/* getpid: X = 0; A /= X -- the program returns 0, KILL_THREAD */
	struct sock_filter f[] = {
		LD_NR,
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getpid, 0, 3),
		BPF_STMT(BPF_LDX | BPF_IMM, 0),
		BPF_STMT(BPF_ALU | BPF_DIV | BPF_X, 0),
		ALLOW,
		ALLOW,
	};
	EXPECT(INSTALL(f), 0);
	EXPECT_TRUE(syscall(SYS_getppid) > 0);
	fflush(stdout);
	syscall(SYS_getpid);
	SHOW("not reached");
}

static void *call_getpid(void *arg)
{
	(void)arg;
	syscall(SYS_getpid);
	return (void *)1;
}

static void kill_one_thread(void)
{
	struct sock_filter f[] = {LD_NR, ON(SYS_getpid, SECCOMP_RET_KILL_THREAD), ALLOW};
	EXPECT(INSTALL(f), 0);
	pthread_t t;
	EXPECT_RC(pthread_create(&t, NULL, call_getpid, NULL), 0);
	/* the thread dies alone; its exit still clears its tid */
	EXPECT_RC(pthread_join(t, NULL), 0);
	SHOW("the other thread lives on");
}

static void kill_process_from_thread(void)
{
	struct sock_filter f[] = {LD_NR, ON(SYS_getpid, SECCOMP_RET_KILL_PROCESS), ALLOW};
	EXPECT(INSTALL(f), 0);
	fflush(stdout);
	pthread_t t;
	pthread_create(&t, NULL, call_getpid, NULL);
	pthread_join(t, NULL);
	SHOW("not reached");
}

static void killing(void)
{
	int st = run(kill_process);
	EXPECT_TRUE(KILLED_BY(st, SIGSYS));
	st = run(kill_thread_alone);
	EXPECT_TRUE(KILLED_BY(st, SIGSYS));
	st = run(unknown_action);
	EXPECT_TRUE(KILLED_BY(st, SIGSYS));
	st = run(division_by_zero);
	EXPECT_TRUE(KILLED_BY(st, SIGSYS));
	st = run(kill_one_thread);
	EXPECT_TRUE(EXITED_0(st));
	st = run(kill_process_from_thread);
	EXPECT_TRUE(KILLED_BY(st, SIGSYS));
}

/* --- seccomp_data: the instruction pointer --------------------------- */

/* getppid from a known place: the filter below matches the address after
 * this syscall instruction only. */
long raw_getppid(void);
extern char raw_getppid_ret[];
__asm__(".text\n"
	".globl raw_getppid\n"
	"raw_getppid:\n"
	"\tmov $110, %eax\n"
	"\tsyscall\n"
	"raw_getppid_ret:\n"
	"\tret\n");

static void instruction_pointer(void)
{
	unsigned long at = (unsigned long)raw_getppid_ret;
	struct sock_filter f[] = {
		LD_NR,
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 5),
		LD(offsetof(struct seccomp_data, instruction_pointer)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)at, 0, 3),
		LD(offsetof(struct seccomp_data, instruction_pointer) + 4),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)(at >> 32), 0, 1),
		RET(SECCOMP_RET_ERRNO | EDOM),
		ALLOW,
	};
	EXPECT(INSTALL(f), 0);
	/* (several times: the first call and the later ones may reach the
	 * kernel differently) */
	for (int i = 0; i < 3; i++)
		EXPECT(raw_getppid(), -EDOM);
	EXPECT_TRUE(syscall(SYS_getppid) > 0);
}

/* --- classic BPF arithmetic as the kernel computes it ---------------- */

/* getpriority(a, b, op) answers ERRNO | ((a op b) & 0xfff): op picks one
 * block of six instructions, "if (A == op) { <four>; goto end; }", whose
 * four run on A = a, X = b (padded with "ja 0", which does nothing). */
enum { ADD_X, SUB_X, MUL_X, DIV_X, AND_X, OR_X, XOR_X, LSH_X, RSH_X, NEG, ADD_K, SUB_K, MUL_K,
       DIV_K, AND_K, OR_K, XOR_K, LSH_K, RSH_K, JGT_X, JGE_X, JSET_X, JEQ_X, JGT_K, JGE_K,
       JSET_K, MEM, STX, TXA, LEN, LDX_LEN, NOPS };

#define CALC_K 5
#define BLOCK 6
#define PROLOGUE 6
#define CALC_END (PROLOGUE + BLOCK * NOPS + 1)
static struct sock_filter calc[CALC_END + 3];

static void build_calc(void)
{
	struct sock_filter prologue[PROLOGUE] = {
		LD_NR,
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getpriority, 1, 0),
		ALLOW,
		LD_ARG(1),
		BPF_STMT(BPF_MISC | BPF_TAX, 0),
		LD_ARG(2),
	};
	memcpy(calc, prologue, sizeof prologue);
	const struct sock_filter nop = BPF_STMT(BPF_JMP | BPF_JA, 0);
	const struct sock_filter a = LD_ARG(0);
	for (int op = 0; op < NOPS; op++) {
		struct sock_filter *b = &calc[PROLOGUE + BLOCK * op];
		struct sock_filter body[4] = {a, nop, nop, nop};
		int alu = -1, jmp = -1;
		switch (op) {
		case ADD_X: alu = BPF_ADD | BPF_X; break;
		case SUB_X: alu = BPF_SUB | BPF_X; break;
		case MUL_X: alu = BPF_MUL | BPF_X; break;
		case DIV_X: alu = BPF_DIV | BPF_X; break;
		case AND_X: alu = BPF_AND | BPF_X; break;
		case OR_X: alu = BPF_OR | BPF_X; break;
		case XOR_X: alu = BPF_XOR | BPF_X; break;
		case LSH_X: alu = BPF_LSH | BPF_X; break;
		case RSH_X: alu = BPF_RSH | BPF_X; break;
		case NEG: alu = BPF_NEG; break;
		case ADD_K: alu = BPF_ADD; break;
		case SUB_K: alu = BPF_SUB; break;
		case MUL_K: alu = BPF_MUL; break;
		case DIV_K: alu = BPF_DIV; break;
		case AND_K: alu = BPF_AND; break;
		case OR_K: alu = BPF_OR; break;
		case XOR_K: alu = BPF_XOR; break;
		case LSH_K: alu = BPF_LSH; break;
		case RSH_K: alu = BPF_RSH; break;
		case JGT_X: jmp = BPF_JGT | BPF_X; break;
		case JGE_X: jmp = BPF_JGE | BPF_X; break;
		case JSET_X: jmp = BPF_JSET | BPF_X; break;
		case JEQ_X: jmp = BPF_JEQ | BPF_X; break;
		case JGT_K: jmp = BPF_JGT; break;
		case JGE_K: jmp = BPF_JGE; break;
		case JSET_K: jmp = BPF_JSET; break;
		case MEM: /* A -> M[7] -> X -> A */
			body[1] = (struct sock_filter)BPF_STMT(BPF_ST, 7);
			body[2] = (struct sock_filter)BPF_STMT(BPF_LDX | BPF_MEM, 7);
			body[3] = (struct sock_filter)BPF_STMT(BPF_MISC | BPF_TXA, 0);
			break;
		case STX: /* X -> M[3] -> A */
			body[1] = (struct sock_filter)BPF_STMT(BPF_STX, 3);
			body[2] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_MEM, 3);
			break;
		case TXA:
			body[1] = (struct sock_filter)BPF_STMT(BPF_MISC | BPF_TXA, 0);
			break;
		case LEN:
			body[0] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0);
			break;
		default: /* LDX_LEN */
			body[0] = (struct sock_filter)BPF_STMT(BPF_LDX | BPF_W | BPF_LEN, 0);
			body[1] = (struct sock_filter)BPF_STMT(BPF_MISC | BPF_TXA, 0);
			break;
		}
		if (alu >= 0)
			body[1] = (struct sock_filter)BPF_STMT(BPF_ALU | alu, CALC_K);
		if (jmp >= 0) {
			/* taken: over "A = 0", so A stays a */
			body[1] = (struct sock_filter)BPF_JUMP(BPF_JMP | jmp, CALC_K, 1, 0);
			body[2] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_IMM, 0);
		}
		b[0] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, op, 0, BLOCK - 1);
		memcpy(&b[1], body, sizeof body);
		int ja = PROLOGUE + BLOCK * op + BLOCK - 1;
		b[5] = (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, CALC_END - ja - 1);
	}
	/* no such op */
	calc[CALC_END - 1] = (struct sock_filter)RET(SECCOMP_RET_ERRNO | 1);
	calc[CALC_END] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xfff);
	calc[CALC_END + 1] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_OR | BPF_K, SECCOMP_RET_ERRNO);
	calc[CALC_END + 2] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_A, 0);
}

static unsigned expect_calc(int op, unsigned a, unsigned b)
{
	const unsigned K = CALC_K;
	switch (op) {
	case ADD_X: return a + b;
	case SUB_X: return a - b;
	case MUL_X: return a * b;
	case DIV_X: return a / b;
	case AND_X: return a & b;
	case OR_X: return a | b;
	case XOR_X: return a ^ b;
	case LSH_X: return a << (b & 31);
	case RSH_X: return a >> (b & 31);
	case NEG: return -a;
	case ADD_K: return a + K;
	case SUB_K: return a - K;
	case MUL_K: return a * K;
	case DIV_K: return a / K;
	case AND_K: return a & K;
	case OR_K: return a | K;
	case XOR_K: return a ^ K;
	case LSH_K: return a << K;
	case RSH_K: return a >> K;
	case JGT_X: return a > b ? a : 0;
	case JGE_X: return a >= b ? a : 0;
	case JSET_X: return (a & b) ? a : 0;
	case JEQ_X: return a == b ? a : 0;
	case JGT_K: return a > K ? a : 0;
	case JGE_K: return a >= K ? a : 0;
	case JSET_K: return (a & K) ? a : 0;
	case MEM: return a;
	case STX: return b;
	case TXA: return b;
	default: return 64; /* LEN, LDX_LEN: sizeof(struct seccomp_data) */
	}
}

static void arithmetic(void)
{
	build_calc();
	EXPECT(install(calc, LEN(calc), 0), 0);
	static const unsigned pairs[][2] = {
		{7, 3}, {3, 7}, {0x7ff, 2}, {0xfffffff0, 0x11}, {5, 5}, {6, 1}, {1, 33}, {0x80000000, 36},
	};
	for (int op = 0; op < NOPS; op++)
		for (unsigned p = 0; p < LEN(pairs); p++) {
			unsigned a = pairs[p][0], b = pairs[p][1];
			errno = 0;
			long r = syscall(SYS_getpriority, a, b, op);
			unsigned got = r == 0 ? 0 : (unsigned)errno;
			unsigned want = expect_calc(op, a, b) & 0xfff;
			if (r != 0 && r != -1)
				got = 0xffffffff;
			if (got != want) {
				SHOW("op %d on %#x, %#x: %#x, expected %#x", op, a, b, got, want);
				t_fail("the value computed");
			}
		}
	SHOW("%d operations on %d pairs computed", NOPS, (int)LEN(pairs));
}

/* --- strict mode ----------------------------------------------------- */

static void strict_killed(void)
{
	fflush(stdout);
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0) != 0)
		_exit(3);
	static const char msg[] = "strict: write works\n";
	write(1, msg, sizeof msg - 1);
	syscall(SYS_getpid);
	static const char no[] = "strict: not reached\n";
	write(1, no, sizeof no - 1);
	syscall(SYS_exit, 4);
}

static void strict_exits(void)
{
	fflush(stdout);
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_STRICT, 0, NULL) != 0)
		_exit(3);
	static const char msg[] = "strict: exit works\n";
	write(1, msg, sizeof msg - 1);
	/* exit, not exit_group */
	syscall(SYS_exit, 7);
}

static void strict(void)
{
	int st = run(strict_killed);
	EXPECT_TRUE(KILLED_BY(st, SIGKILL));
	st = run(strict_exits);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 7);
}

/* --- TSYNC ----------------------------------------------------------- */

struct peer {
	pthread_t t;
	int go[2];
	volatile pid_t tid;
	int own_filter;
	long ppid_ret, ppid_errno, mode, nnp;
};

static struct sock_filter ppid_eperm[] = {LD_NR, ON(SYS_getppid, SECCOMP_RET_ERRNO | EPERM), ALLOW};
static struct sock_filter uid_eperm[] = {LD_NR, ON(SYS_getuid, SECCOMP_RET_ERRNO | EPERM), ALLOW};
static struct sock_filter gid_eperm[] = {LD_NR, ON(SYS_getgid, SECCOMP_RET_ERRNO | EPERM), ALLOW};

static void *peer_main(void *arg)
{
	struct peer *p = arg;
	if (p->own_filter)
		INSTALL(gid_eperm);
	p->tid = syscall(SYS_gettid);
	char c;
	while (read(p->go[0], &c, 1) < 0 && errno == EINTR)
		;
	errno = 0;
	p->ppid_ret = syscall(SYS_getppid);
	p->ppid_errno = errno;
	p->mode = prctl(PR_GET_SECCOMP);
	p->nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
	return NULL;
}

static void start_peer(struct peer *p, int own_filter)
{
	memset(p, 0, sizeof *p);
	p->own_filter = own_filter;
	if (pipe(p->go) || pthread_create(&p->t, NULL, peer_main, p))
		exit(4);
	while (!p->tid)
		sched_yield();
}

static void finish_peer(struct peer *p)
{
	write(p->go[1], "g", 1);
	pthread_join(p->t, NULL);
	close(p->go[0]);
	close(p->go[1]);
}

static long peer_status(struct peer *p, const char *key)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/task/%d/status", p->tid);
	return status_of(path, key);
}

static void tsync(void)
{
	struct peer a, b;
	/* a starts without no_new_privs; the caller then sets it */
	start_peer(&a, 0);
	EXPECT(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	EXPECT(install(ppid_eperm, LEN(ppid_eperm), SECCOMP_FILTER_FLAG_TSYNC), 0);
	EXPECT(peer_status(&a, "Seccomp"), 2);
	EXPECT(peer_status(&a, "Seccomp_filters"), 1);
	/* a filter of the caller's own; a's chain is still part of the
	 * caller's, so a second TSYNC can replace it */
	EXPECT(INSTALL(uid_eperm), 0);
	EXPECT(peer_status(&a, "Seccomp_filters"), 1);
	EXPECT(install(allow_all, 1, SECCOMP_FILTER_FLAG_TSYNC | SECCOMP_FILTER_FLAG_LOG), 0);
	EXPECT(peer_status(&a, "Seccomp_filters"), 3);
	finish_peer(&a);
	EXPECT(a.ppid_ret, -1);
	EXPECT(a.ppid_errno, EPERM);
	EXPECT(a.mode, 2);
	/* no_new_privs came with the filter */
	EXPECT(a.nnp, 1);

	/* b adds a filter of its own: its chain is no part of the caller's,
	 * and TSYNC fails with b's thread id */
	start_peer(&b, 1);
	EXPECT(peer_status(&b, "Seccomp_filters"), 4);
	errno = 0;
	long r = install(allow_all, 1, SECCOMP_FILTER_FLAG_TSYNC);
	EXPECT_TRUE(r == b.tid);
	EXPECT_ERR(install(allow_all, 1, SECCOMP_FILTER_FLAG_TSYNC | SECCOMP_FILTER_FLAG_TSYNC_ESRCH),
		   ESRCH);
	/* neither attached anything */
	EXPECT(SELF_STATUS("Seccomp_filters"), 3);
	finish_peer(&b);
	EXPECT(b.ppid_errno, EPERM);
	/* with b gone, it works */
	EXPECT(install(allow_all, 1, SECCOMP_FILTER_FLAG_TSYNC), 0);
	EXPECT(SELF_STATUS("Seccomp_filters"), 4);
	/* the accepted flags that change nothing here */
	EXPECT(install(allow_all, 1, SECCOMP_FILTER_FLAG_SPEC_ALLOW), 0);
	EXPECT(install(allow_all, 1, SECCOMP_FILTER_FLAG_TSYNC_ESRCH), 0);
}

/* --- the total instruction count ------------------------------------- */

static struct sock_filter longest[BPF_MAXINSNS];

static void too_many_instructions(void)
{
	for (int i = 0; i < BPF_MAXINSNS - 1; i++)
		longest[i] = (struct sock_filter)LD_NR;
	longest[BPF_MAXINSNS - 1] = (struct sock_filter)ALLOW;
	/* 4096 + 7 * (4096 + 4) passes 32768: the eighth does not fit */
	for (int i = 1; i <= 7; i++)
		EXPECT(install(longest, BPF_MAXINSNS, 0), 0);
	EXPECT_ERR(install(longest, BPF_MAXINSNS, 0), ENOMEM);
	EXPECT(INSTALL(allow_all), 0);
	EXPECT(SELF_STATUS("Seccomp_filters"), 8);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "after-exec"))
		return after_exec();
	EXPECT(prctl(PR_GET_SECCOMP), 0);
	EXPECT(SELF_STATUS("Seccomp"), 0);
	EXPECT(SELF_STATUS("Seccomp_filters"), 0);

	SHOW("-- privilege");
	EXPECT_TRUE(EXITED_0(run(unprivileged)));
	EXPECT_TRUE(EXITED_0(run(admin_without_nnp)));
	SHOW("-- tsync");
	EXPECT_TRUE(EXITED_0(run(tsync)));

	EXPECT(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	SHOW("-- refused programs");
	refused_programs();
	SHOW("-- actions available");
	actions_avail();
	SHOW("-- errno");
	EXPECT_TRUE(EXITED_0(run(errno_actions)));
	SHOW("-- execve");
	EXPECT_TRUE(EXITED_0(run(exec_keeps_filters)));
	EXPECT_TRUE(EXITED_0(run(exec_from_a_thread)));
	SHOW("-- stacked");
	EXPECT_TRUE(EXITED_0(run(stacked)));
	SHOW("-- trap");
	EXPECT_TRUE(EXITED_0(run(trap)));
	SHOW("-- kill");
	killing();
	SHOW("-- instruction pointer");
	EXPECT_TRUE(EXITED_0(run(instruction_pointer)));
	SHOW("-- arithmetic");
	EXPECT_TRUE(EXITED_0(run(arithmetic)));
	SHOW("-- strict");
	strict();
	SHOW("-- instruction limit");
	EXPECT_TRUE(EXITED_0(run(too_many_instructions)));
	EXPECT(prctl(PR_GET_SECCOMP), 0);
	return t_done();
}
