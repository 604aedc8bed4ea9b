/* What survives execve: pid, cwd, umask, rlimits, ignored signals and the
 * signal mask, descriptors without FD_CLOEXEC. What does not: handlers,
 * FD_CLOEXEC descriptors, the alternate signal stack. */
#include "t.h"
#include <sys/resource.h>

#define SELF GUEST_DIR "/execve_state"

static void handler(int sig)
{
	(void)sig;
}

static int child(char **argv)
{
	SHOW("child argv[1]=%s argv[3]=%s", argv[1], argv[3]);
	EXPECT_TRUE(getpid() == atoi(argv[2]));
	char cwd[PATH_MAX];
	EXPECT_TRUE(getcwd(cwd, sizeof cwd) && !strcmp(cwd, "/usr/lib"));
	EXPECT(umask(0), 027);
	struct rlimit rl;
	EXPECT(getrlimit(RLIMIT_NOFILE, &rl), 0);
	EXPECT(rl.rlim_cur, 100);
	EXPECT(fcntl(3, F_GETFD), 0);
	EXPECT_ERR(fcntl(4, F_GETFD), EBADF);
	char c[5];
	/* The kept descriptor's offset is preserved too. */
	EXPECT(read(3, c, 5), 5);
	SHOW("kept fd reads: %.5s", c);
	struct sigaction sa;
	EXPECT(sigaction(SIGUSR1, NULL, &sa), 0);
	EXPECT_TRUE(sa.sa_handler == SIG_DFL);
	EXPECT(sigaction(SIGUSR2, NULL, &sa), 0);
	EXPECT_TRUE(sa.sa_handler == SIG_IGN);
	sigset_t mask;
	EXPECT(sigprocmask(SIG_BLOCK, NULL, &mask), 0);
	EXPECT_TRUE(sigismember(&mask, SIGHUP) && !sigismember(&mask, SIGINT));
	stack_t ss;
	EXPECT(sigaltstack(NULL, &ss), 0);
	EXPECT(ss.ss_flags, SS_DISABLE);
	extern char **environ;
	SHOW("child env: %s", environ[0] ? environ[0] : "(none)");
	EXPECT_TRUE(environ[0] && !environ[1]);
	return t_done();
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "child"))
		return child(argv);
	EXPECT(chdir("/usr/lib"), 0);
	umask(027);
	struct rlimit rl;
	EXPECT(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = 100;
	EXPECT(setrlimit(RLIMIT_NOFILE, &rl), 0);
	EXPECT(open(FIX("file.txt"), O_RDONLY), 3);
	EXPECT(lseek(3, 6, SEEK_SET), 6);
	EXPECT(open(FIX("file.txt"), O_RDONLY | O_CLOEXEC), 4);
	signal(SIGUSR1, handler);
	signal(SIGUSR2, SIG_IGN);
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGHUP);
	EXPECT(sigprocmask(SIG_BLOCK, &mask, NULL), 0);
	static char alt[65536];
	stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt, .ss_flags = 0};
	EXPECT(sigaltstack(&ss, NULL), 0);
	char pid[32];
	snprintf(pid, sizeof pid, "%d", getpid());
	char *cargv[] = {SELF, "child", pid, "third", NULL};
	char *cenvp[] = {"ONLY=this", NULL};
	fflush(stdout);
	execve(SELF, cargv, cenvp);
	SHOW("execve failed: errno=%s", errname(errno));
	return 1;
}
