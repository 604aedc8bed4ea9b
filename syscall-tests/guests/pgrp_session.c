/* Process groups and sessions: setpgid/getpgid/setsid/getsid and their
 * errors (EPERM for a group or session leader, ESRCH, EINVAL, EACCES for a
 * child that has exec'd). The checks run in a child: the sandbox's first
 * process may be a session leader (like init), a native test process is not,
 * and a session leader may not change its group. */
#include "t.h"
#include <sys/wait.h>

static int body(void)
{
	pid_t me = getpid();
	EXPECT_TRUE(getpgid(0) == getpgrp());
	EXPECT_TRUE(getsid(0) == getsid(me));
	EXPECT_ERR(getpgid(999999), ESRCH);
	EXPECT_ERR(getsid(999999), ESRCH);
	EXPECT_ERR(setpgid(999999, 0), ESRCH);
	EXPECT_ERR(setpgid(0, -1), EINVAL);

	/* Become a group leader (may already be one). */
	EXPECT(setpgid(0, 0), 0);
	EXPECT_TRUE(getpgrp() == me);
	/* A group leader cannot create a session. */
	EXPECT_ERR(setsid(), EPERM);

	int p[2], back[2];
	EXPECT(pipe(p), 0);
	EXPECT(pipe(back), 0);
	pid_t c = fork();
	if (c == 0) {
		/* The child starts in our group and session. */
		int ok = getpgrp() == me && getsid(0) == getsid(getppid());
		pid_t s = setsid();
		ok = ok && s == getpid() && getsid(0) == getpid() && getpgrp() == getpid();
		/* Now a session leader: setsid again is EPERM, setpgid of self
		 * is EPERM too. */
		ok = ok && setsid() == -1 && errno == EPERM;
		ok = ok && setpgid(0, 0) == -1 && errno == EPERM;
		char r = ok ? 'y' : 'n';
		write(p[1], &r, 1);
		/* Wait for the parent's checks. */
		char dummy;
		read(back[0], &dummy, 1);
		_exit(0);
	}
	char r;
	EXPECT(read(p[0], &r, 1), 1);
	EXPECT(r, 'y');
	/* The child is in another session: moving it is EPERM. */
	EXPECT_TRUE(getsid(c) == c);
	EXPECT_TRUE(getpgid(c) == c);
	EXPECT_ERR(setpgid(c, me), EPERM);
	/* Moving ourselves to the child's group (other session): EPERM. */
	EXPECT_ERR(setpgid(0, c), EPERM);
	EXPECT(write(back[1], "g", 1), 1);
	int st;
	EXPECT_TRUE(waitpid(c, &st, 0) == c);
	EXPECT(WEXITSTATUS(st), 0);

	/* A child in our session can be moved into a new group and back. */
	int q[2];
	EXPECT(pipe(q), 0);
	c = fork();
	if (c == 0) {
		char d;
		read(q[0], &d, 1);
		_exit(0);
	}
	EXPECT(setpgid(c, c), 0);
	EXPECT_TRUE(getpgid(c) == c);
	EXPECT(setpgid(c, me), 0);
	EXPECT_TRUE(getpgid(c) == me);
	/* Into a group that does not exist in the session: EPERM. */
	EXPECT_ERR(setpgid(c, 999999), EPERM);
	/* kill(0, sig) and kill(-pgid, sig) reach the group. */
	EXPECT(setpgid(c, c), 0);
	EXPECT(kill(-c, SIGTERM), 0);
	EXPECT_TRUE(waitpid(c, &st, 0) == c);
	EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
	EXPECT_ERR(kill(-c, 0), ESRCH);
	/* After the child execs, its parent can no longer change its group. */
	c = fork();
	if (c == 0) {
		close(q[1]);
		dup2(q[0], 0);
		execl("/bin/busybox", "busybox", "sh", "-c", "read x", (char *)NULL);
		_exit(127);
	}
	close(q[0]);
	usleep(200000);
	EXPECT_ERR(setpgid(c, c), EACCES);
	close(q[1]);
	EXPECT_TRUE(waitpid(c, &st, 0) == c);
	return t_done();
}

int main(void)
{
	pid_t c = fork();
	if (c == 0)
		exit(body());
	int st;
	if (waitpid(c, &st, 0) != c || !WIFEXITED(st))
		return 3;
	return WEXITSTATUS(st);
}
