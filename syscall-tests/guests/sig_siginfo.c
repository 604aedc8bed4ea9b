/* SA_SIGINFO: si_signo, si_code and si_pid/si_uid for kill, tgkill, sigqueue
 * and rt_sigqueueinfo to self, and for a signal sent by a child. */
#include "t.h"
#include <sys/wait.h>

static volatile int got_sig, got_code, got_val;
static volatile pid_t got_pid;
static volatile uid_t got_uid;

static void handler(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	got_sig = sig;
	got_code = si->si_code;
	got_pid = si->si_pid;
	got_uid = si->si_uid;
	got_val = si->si_value.sival_int;
}

static void reset(void)
{
	got_sig = got_code = got_val = 0;
	got_pid = 0;
	got_uid = (uid_t)-1;
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO;
	EXPECT(sigaction(SIGUSR1, &sa, NULL), 0);
	EXPECT(sigaction(SIGRTMIN, &sa, NULL), 0);
	pid_t me = getpid();

	reset();
	EXPECT(kill(me, SIGUSR1), 0);
	EXPECT(got_sig, SIGUSR1);
	EXPECT(got_code, SI_USER);
	EXPECT_TRUE(got_pid == me);
	EXPECT_TRUE(got_uid == getuid());

	reset();
	EXPECT(syscall(SYS_tgkill, me, syscall(SYS_gettid), SIGUSR1), 0);
	EXPECT(got_code, SI_TKILL);
	EXPECT_TRUE(got_pid == me);

	reset();
	EXPECT(syscall(SYS_tkill, syscall(SYS_gettid), SIGUSR1), 0);
	EXPECT(got_code, SI_TKILL);

	reset();
	union sigval v = {.sival_int = 4242};
	EXPECT(sigqueue(me, SIGRTMIN, v), 0);
	EXPECT(got_sig, SIGRTMIN);
	EXPECT(got_code, SI_QUEUE);
	EXPECT(got_val, 4242);
	EXPECT_TRUE(got_pid == me);

	/* rt_sigqueueinfo to self with a negative si_code (allowed for self). */
	reset();
	siginfo_t si;
	memset(&si, 0, sizeof si);
	si.si_signo = SIGUSR1;
	si.si_code = SI_QUEUE;
	si.si_pid = me;
	si.si_uid = getuid();
	si.si_value.sival_int = 77;
	EXPECT(syscall(SYS_rt_sigqueueinfo, me, SIGUSR1, &si), 0);
	EXPECT(got_code, SI_QUEUE);
	EXPECT(got_val, 77);
	/* rt_tgsigqueueinfo to this thread. */
	reset();
	si.si_value.sival_int = 78;
	EXPECT(syscall(SYS_rt_tgsigqueueinfo, me, syscall(SYS_gettid), SIGUSR1, &si), 0);
	EXPECT(got_val, 78);
	/* A positive si_code (kernel-only) is refused for a user sender... except
	 * to oneself: Linux allows any code when the target is the caller. */
	si.si_code = SI_KERNEL;
	EXPECT_ERR(syscall(SYS_rt_sigqueueinfo, me, SIGUSR1, BADPTR), EFAULT);
	EXPECT_ERR(syscall(SYS_rt_sigqueueinfo, me, 0x1000, &si), EINVAL);

	/* A child sends SIGUSR1 to its parent: si_pid is the child. Block the
	 * signal and take it with sigwaitinfo so delivery timing is fixed. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	EXPECT(sigprocmask(SIG_BLOCK, &set, NULL), 0);
	pid_t child = fork();
	if (child == 0) {
		kill(getppid(), SIGUSR1);
		_exit(0);
	}
	siginfo_t wi;
	EXPECT(sigwaitinfo(&set, &wi), SIGUSR1);
	EXPECT(wi.si_code, SI_USER);
	EXPECT_TRUE(wi.si_pid == child);
	int st;
	EXPECT_TRUE(waitpid(child, &st, 0) == child);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return t_done();
}
