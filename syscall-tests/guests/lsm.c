/* lsm_list_modules, lsm_get_self_attr, lsm_set_self_attr (Linux 6.8):
 * capabilities and Landlock are among the modules (a host has more), a
 * short buffer is E2BIG with the size needed, and no module here keeps a
 * process attribute to read or set. */
#include "t.h"

#include <stdint.h>

#ifndef SYS_lsm_list_modules
#define SYS_lsm_get_self_attr 459
#define SYS_lsm_set_self_attr 460
#define SYS_lsm_list_modules 461
#endif

int main(void)
{
	uint64_t ids[32];
	uint32_t size = sizeof ids;
	long n = syscall(SYS_lsm_list_modules, ids, &size, 0);
	int cap = 0, landlock = 0;
	for (long i = 0; i < n; i++) {
		cap |= ids[i] == 100;
		landlock |= ids[i] == 110;
	}
	EXPECT_TRUE(n >= 2 && size == n * 8 && cap && landlock);
	uint32_t small = 8;
	EXPECT_ERR(syscall(SYS_lsm_list_modules, ids, &small, 0), E2BIG);
	EXPECT_TRUE(small == n * 8);
	EXPECT_ERR(syscall(SYS_lsm_list_modules, ids, &size, 1), EINVAL);
	EXPECT_ERR(syscall(SYS_lsm_list_modules, ids, BADPTR, 0), EFAULT);
	char buf[256];
	uint32_t sz = sizeof buf;
	EXPECT_ERR(syscall(SYS_lsm_get_self_attr, 100, buf, &sz, 0), EOPNOTSUPP);
	EXPECT(sz, 0);
	EXPECT_ERR(syscall(SYS_lsm_get_self_attr, 100, buf, &sz, 2), EINVAL);
	memset(buf, 0, sizeof buf);
	EXPECT_ERR(syscall(SYS_lsm_set_self_attr, 100, buf, 64, 0), EINVAL);
	EXPECT_ERR(syscall(SYS_lsm_set_self_attr, 100, buf, 64, 1), EINVAL);
	return t_done();
}
