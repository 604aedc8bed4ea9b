/* set_tid_address returns the caller's thread id. */
#include "t.h"

static int tid_slot;

int main(void)
{
	long tid = syscall(SYS_set_tid_address, &tid_slot);
	EXPECT_TRUE(tid == syscall(SYS_gettid));
	EXPECT_TRUE(tid == getpid());
	/* Any pointer is accepted; it is used only at thread exit. */
	EXPECT_TRUE(syscall(SYS_set_tid_address, NULL) == tid);
	EXPECT_TRUE(syscall(SYS_set_tid_address, BADPTR) == tid);
	return t_done();
}
