/* PR_SET_CHILD_SUBREAPER and PR_SET_PDEATHSIG: when a middle process
 * exits, its child is reparented to the nearest subreaper ancestor (which
 * can then wait for it) and receives its parent-death signal. */
#include "t.h"
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

static int report = -1;

static void on_term(int sig)
{
	char c = sig == SIGTERM ? 'd' : '?';
	write(report, &c, 1);
}

int main(void)
{
	int on = -1;
	EXPECT(prctl(PR_GET_CHILD_SUBREAPER, &on), 0);
	EXPECT(on, 0);
	EXPECT(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	EXPECT(prctl(PR_GET_CHILD_SUBREAPER, &on), 0);
	EXPECT(on, 1);

	int ready[2], res[2];
	EXPECT(pipe(ready), 0);
	EXPECT(pipe(res), 0);
	pid_t me = getpid();
	pid_t mid = fork();
	if (mid == 0) {
		pid_t g = fork();
		if (g == 0) {
			/* The grandchild: asks for SIGTERM when its parent dies. */
			report = res[1];
			struct sigaction sa;
			memset(&sa, 0, sizeof sa);
			sa.sa_handler = on_term;
			sigaction(SIGTERM, &sa, NULL);
			prctl(PR_SET_PDEATHSIG, SIGTERM);
			int sig = 0;
			prctl(PR_GET_PDEATHSIG, &sig);
			char c = sig == SIGTERM ? 'r' : 'x';
			write(ready[1], &c, 1);
			/* Wait until reparented, then report the new parent. */
			while (getppid() != me)
				usleep(1000);
			usleep(50000);
			c = 'p';
			write(res[1], &c, 1);
			_exit(7);
		}
		char c;
		read(ready[0], &c, 1);
		_exit(c == 'r' ? 3 : 4);
	}
	int st;
	EXPECT_TRUE(waitpid(mid, &st, 0) == mid);
	EXPECT(WEXITSTATUS(st), 3);
	/* The grandchild got its parent-death signal and is now ours. */
	char got[2] = {0, 0};
	EXPECT(read(res[0], &got[0], 1), 1);
	EXPECT(read(res[0], &got[1], 1), 1);
	EXPECT(got[0], 'd');
	EXPECT(got[1], 'p');
	pid_t g = wait(&st);
	EXPECT_TRUE(g > 0 && g != mid);
	EXPECT(WEXITSTATUS(st), 7);
	EXPECT_ERR(wait(&st), ECHILD);
	return t_done();
}
