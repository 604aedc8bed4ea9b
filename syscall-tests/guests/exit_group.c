/* exit_group's status is truncated to 8 bits: 263 & 0xff = 7. */
#include "t.h"

int main(void)
{
	SHOW("exiting with 263");
	fflush(stdout);
	syscall(SYS_exit_group, 263);
	SHOW("not reached");
	return 1;
}
