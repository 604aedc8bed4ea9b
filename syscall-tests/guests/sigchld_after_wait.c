/* A child's SIGCHLD is generated with its exit, not after: once waitpid
 * has reaped it, a parent that ignores SIGCHLD by default and now blocks
 * it never finds that SIGCHLD pending (Linux sends it under the same lock
 * that makes the child a zombie; a signal ignored when sent is dropped). */
#include "t.h"

int main(void)
{
	sigset_t ch, pending;
	sigemptyset(&ch);
	sigaddset(&ch, SIGCHLD);
	int stale = 0, runs = 300;
	for (int i = 0; i < runs; i++) {
		pid_t c = fork();
		if (c == 0)
			_exit(i & 0x7f);
		int status;
		if (waitpid(c, &status, 0) != c || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != (i & 0x7f)) {
			t_failures++;
			break;
		}
		sigprocmask(SIG_BLOCK, &ch, NULL);
		sigpending(&pending);
		stale += sigismember(&pending, SIGCHLD);
		sigprocmask(SIG_UNBLOCK, &ch, NULL);
	}
	EXPECT(stale, 0);
	return t_done();
}
