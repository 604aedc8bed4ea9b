/* personality(2) and the scheduling-policy calls of the caller. */
#include "t.h"
#include <sched.h>
#include <sys/personality.h>
#include <time.h>

int main(void)
{
	EXPECT(syscall(SYS_personality, 0xffffffff), PER_LINUX);
	EXPECT(syscall(SYS_personality, PER_LINUX | ADDR_NO_RANDOMIZE), PER_LINUX);
	EXPECT(syscall(SYS_personality, 0xffffffff), ADDR_NO_RANDOMIZE);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		_exit(syscall(SYS_personality, 0xffffffff) == ADDR_NO_RANDOMIZE ? 0 : 1);
	int st;
	EXPECT_TRUE(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	EXPECT(syscall(SYS_personality, PER_LINUX), ADDR_NO_RANDOMIZE);

	struct timespec ts = {99, 99};
	EXPECT(syscall(SYS_sched_rr_get_interval, 0, &ts), 0);
	EXPECT_TRUE(ts.tv_sec == 0 && ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000);
	EXPECT_ERR(syscall(SYS_sched_rr_get_interval, -1, &ts), EINVAL);
	EXPECT_ERR(syscall(SYS_sched_rr_get_interval, 999999, &ts), ESRCH);
	EXPECT_ERR(syscall(SYS_sched_rr_get_interval, 0, BADPTR), EFAULT);

	struct sched_param zero = {0}, five = {5}, one = {1};
	EXPECT(syscall(SYS_sched_setscheduler, 0, SCHED_OTHER, &zero), 0);
	EXPECT_ERR(syscall(SYS_sched_setscheduler, 0, SCHED_OTHER, &five), EINVAL);
	EXPECT_ERR(syscall(SYS_sched_setscheduler, -1, SCHED_OTHER, &zero), EINVAL);
	EXPECT_ERR(syscall(SYS_sched_setscheduler, 0, SCHED_OTHER, NULL), EINVAL);
	EXPECT_ERR(syscall(SYS_sched_setscheduler, 0, SCHED_OTHER, BADPTR), EFAULT);
	EXPECT_ERR(syscall(SYS_sched_setscheduler, 999999, SCHED_OTHER, &zero), ESRCH);
	EXPECT_ERR(syscall(SYS_sched_setscheduler, 0, 77, &zero), EINVAL);
	EXPECT(syscall(SYS_sched_setparam, 0, &zero), 0);
	EXPECT_ERR(syscall(SYS_sched_setparam, 0, &one), EINVAL);
	EXPECT(syscall(SYS_sched_getscheduler, 0), SCHED_OTHER);

	/* Real-time policies need CAP_SYS_NICE. */
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(2);
		long fifo = syscall(SYS_sched_setscheduler, 0, SCHED_FIFO, &one);
		int e1 = errno;
		long rr = syscall(SYS_sched_setscheduler, 0, SCHED_RR, &one);
		int e2 = errno;
		_exit(fifo == -1 && e1 == EPERM && rr == -1 && e2 == EPERM ? 0 : 1);
	}
	EXPECT_TRUE(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return t_done();
}
