/* wait4: WNOHANG while a child runs, reaping with rusage, ECHILD with no
 * children, waiting for a specific pid, for any, and for a process group. */
#include "t.h"
#include <sys/resource.h>
#include <sys/wait.h>

int main(void)
{
	int st;
	struct rusage ru;
	EXPECT_ERR(wait4(-1, &st, 0, NULL), ECHILD);
	EXPECT_ERR(wait4(-1, &st, WNOHANG, NULL), ECHILD);
	EXPECT_ERR(wait4(12345, &st, 0, NULL), ECHILD);

	pid_t c = fork();
	if (c == 0) {
		usleep(200000);
		/* Burn some CPU for rusage. */
		volatile unsigned long x = 0;
		for (unsigned long i = 0; i < 50000000UL; i++)
			x += i;
		_exit(4);
	}
	EXPECT(wait4(c, &st, WNOHANG, NULL), 0);
	EXPECT(wait4(-1, &st, WNOHANG, &ru), 0);
	memset(&ru, 0, sizeof ru);
	EXPECT_TRUE(wait4(c, &st, 0, &ru) == c);
	EXPECT_TRUE(WIFEXITED(st));
	EXPECT(WEXITSTATUS(st), 4);
	EXPECT_TRUE(ru.ru_utime.tv_sec > 0 || ru.ru_utime.tv_usec > 1000);
	EXPECT_ERR(wait4(c, &st, WNOHANG, NULL), ECHILD);

	/* Several children: wait for any, each exactly once. */
	pid_t kids[3];
	for (int i = 0; i < 3; i++) {
		kids[i] = fork();
		if (kids[i] == 0)
			_exit(10 + i);
	}
	int seen = 0;
	for (int i = 0; i < 3; i++) {
		pid_t w = wait4(-1, &st, 0, NULL);
		for (int k = 0; k < 3; k++)
			if (w == kids[k] && WEXITSTATUS(st) == 10 + k)
				seen |= 1 << k;
	}
	EXPECT(seen, 7);
	EXPECT_ERR(wait4(-1, &st, 0, NULL), ECHILD);

	/* A child in its own group: wait for -pgid and 0 (our group). */
	c = fork();
	if (c == 0) {
		setpgid(0, 0);
		usleep(100000);
		_exit(5);
	}
	setpgid(c, c);
	/* No child left in our own group. */
	EXPECT_ERR(wait4(0, &st, WNOHANG, NULL), ECHILD);
	EXPECT_TRUE(wait4(-c, &st, 0, NULL) == c);
	EXPECT(WEXITSTATUS(st), 5);

	/* A grandchild is not our child; status of an orphan is not ours. */
	c = fork();
	if (c == 0) {
		pid_t g = fork();
		if (g == 0)
			_exit(0);
		int s2;
		_exit(wait4(g, &s2, 0, NULL) == g ? 6 : 1);
	}
	EXPECT_TRUE(wait4(c, &st, 0, NULL) == c);
	EXPECT(WEXITSTATUS(st), 6);
	/* Errors. */
	EXPECT_ERR(wait4(-1, &st, 0x100, NULL), EINVAL);
	c = fork();
	if (c == 0)
		_exit(0);
	EXPECT_ERR(wait4(c, BADPTR, 0, NULL), EFAULT);
	/* INT_MIN is no pid and no group (found by the fuzzer: its negation
	 * once overflowed in the Sentry). */
	EXPECT_ERR(syscall(SYS_wait4, (int)0x80000000, NULL, WNOHANG, NULL), ESRCH);
	return t_done();
}
