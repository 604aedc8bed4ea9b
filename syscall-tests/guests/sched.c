/* sched_getaffinity, sched_yield, scheduler policy, getcpu. */
#include "t.h"
#include <sched.h>

int main(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	EXPECT(sched_getaffinity(0, sizeof set, &set), 0);
	EXPECT_TRUE(CPU_COUNT(&set) >= 1);
	long r = syscall(SYS_sched_getaffinity, 0, sizeof set, &set);
	EXPECT_TRUE(r > 0 && r % 8 == 0 && r <= (long)sizeof set);
	EXPECT_ERR(syscall(SYS_sched_getaffinity, 0, 4, &set), EINVAL);
	EXPECT_ERR(syscall(SYS_sched_getaffinity, 0, sizeof set, BADPTR), EFAULT);
	EXPECT(sched_setaffinity(0, sizeof set, &set), 0);
	EXPECT(sched_yield(), 0);
	EXPECT(sched_getscheduler(0), SCHED_OTHER);
	struct sched_param sp;
	EXPECT(sched_getparam(0, &sp), 0);
	EXPECT(sp.sched_priority, 0);
	EXPECT(sched_get_priority_max(SCHED_OTHER), 0);
	EXPECT(sched_get_priority_max(SCHED_FIFO), 99);
	EXPECT_ERR(sched_get_priority_max(42), EINVAL);
	unsigned cpu = 999, node = 999;
	EXPECT(getcpu(&cpu, &node), 0);
	EXPECT_TRUE(CPU_ISSET(cpu, &set));
	EXPECT_TRUE(sysconf(_SC_NPROCESSORS_ONLN) >= 1);
	return t_done();
}
