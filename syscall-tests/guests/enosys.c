/* Unknown system call numbers answer ENOSYS (and do not kill the caller). */
#include "t.h"

int main(void)
{
	EXPECT_ERR(syscall(1000), ENOSYS);
	/* The hole between 334 and 424 (335 and 336 are now uretprobe/uprobe,
	 * which raise SIGILL outside a probe trampoline: avoid them). */
	EXPECT_ERR(syscall(400), ENOSYS);
	EXPECT_ERR(syscall(100000, 1, 2, 3), ENOSYS);
	EXPECT_ERR(syscall(-1), ENOSYS);
	EXPECT_ERR(syscall(1000, 0, 0, 0, 0, 0, 0), ENOSYS);
	SHOW("still alive");
	return t_done();
}
