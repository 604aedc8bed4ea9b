/* unshare(2) of what clone shares: a thread's own descriptor table
 * (CLONE_FILES) and working directory (CLONE_FS); the flags Linux refuses. */
#include "t.h"
#include <pthread.h>
#include <sched.h>

static int shared_fd;

static void *thread_main(void *arg)
{
	(void)arg;
	EXPECT(unshare(CLONE_FILES), 0);
	EXPECT(close(shared_fd), 0);
	EXPECT(unshare(CLONE_FS), 0);
	EXPECT(chdir("/tmp"), 0);
	/* The process has two threads: no address space of its own. */
	EXPECT_ERR(unshare(CLONE_VM), EINVAL);
	EXPECT_ERR(unshare(CLONE_THREAD), EINVAL);
	return NULL;
}

int main(void)
{
	EXPECT(chdir("/"), 0);
	shared_fd = open("/dev/null", O_RDONLY);
	EXPECT_TRUE(shared_fd >= 0);
	pthread_t t;
	/* (checked after the join, so the thread's lines come first) */
	int rc = pthread_create(&t, NULL, thread_main, NULL);
	pthread_join(t, NULL);
	EXPECT_TRUE(rc == 0);
	/* The thread closed its copy and moved its own working directory. */
	EXPECT(fcntl(shared_fd, F_GETFD), 0);
	char cwd[64];
	EXPECT_TRUE(getcwd(cwd, sizeof cwd) && !strcmp(cwd, "/"));

	EXPECT(unshare(0), 0);
	EXPECT(unshare(CLONE_FILES | CLONE_FS), 0);
	/* Linux refuses while the joined thread still holds the address
	 * space: pthread_join returns once its tid is cleared, a little
	 * before it lets the mm go. */
	int tries = 0;
	while (unshare(CLONE_VM | CLONE_SIGHAND | CLONE_THREAD) != 0 && errno == EINVAL && ++tries < 200)
		usleep(1000);
	EXPECT(unshare(CLONE_VM | CLONE_SIGHAND | CLONE_THREAD), 0);
	EXPECT_ERR(unshare(CLONE_PARENT), EINVAL);
	EXPECT_ERR(unshare(CLONE_SETTLS), EINVAL);
	EXPECT_ERR(unshare(1 << 31), EINVAL);

	pid_t c = fork();
	if (c == 0) {
		if (setuid(65534))
			_exit(2);
		errno = 0;
		int u = unshare(CLONE_NEWUTS) == -1 && errno == EPERM;
		errno = 0;
		int c2 = syscall(SYS_clone, CLONE_NEWUTS | SIGCHLD, 0, 0, 0, 0) == -1 && errno == EPERM;
		_exit(u && c2 ? 0 : 1);
	}
	int ws;
	waitpid(c, &ws, 0);
	SHOW("nobody may not unshare or clone a UTS namespace: %s", WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? "yes" : "no");
	return t_done();
}
