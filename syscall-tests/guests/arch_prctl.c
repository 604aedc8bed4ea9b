/* arch_prctl: FS base round trip (restored before anything uses TLS). */
#include "t.h"
#include <asm/prctl.h>

static char fake_tls[4096] __attribute__((aligned(64)));

int main(void)
{
	unsigned long old = 0, got = 0, got2 = 0;
	long r1 = syscall(SYS_arch_prctl, ARCH_GET_FS, &old);
	/* errno lives in TLS: keep the window without FS as small as possible,
	 * with raw system calls only. */
	long r2 = syscall(SYS_arch_prctl, ARCH_SET_FS, (unsigned long)fake_tls);
	long r3 = syscall(SYS_arch_prctl, ARCH_GET_FS, &got);
	long r4 = syscall(SYS_arch_prctl, ARCH_SET_FS, old);
	long r5 = syscall(SYS_arch_prctl, ARCH_GET_FS, &got2);
	SHOW("get=%ld set=%ld get=%ld restore=%ld get=%ld", r1, r2, r3, r4, r5);
	EXPECT_TRUE(old != 0);
	EXPECT_TRUE(got == (unsigned long)fake_tls);
	EXPECT_TRUE(got2 == old);
	unsigned long gs = 1;
	EXPECT(syscall(SYS_arch_prctl, ARCH_GET_GS, &gs), 0);
	EXPECT(gs, 0);
	EXPECT_ERR(syscall(SYS_arch_prctl, 0x9999, &gs), EINVAL);
	EXPECT_ERR(syscall(SYS_arch_prctl, ARCH_GET_FS, BADPTR), EFAULT);
	/* Non-canonical addresses are refused. */
	EXPECT_ERR(syscall(SYS_arch_prctl, ARCH_SET_FS, 0x8000000000000000UL), EPERM);
	return t_done();
}
