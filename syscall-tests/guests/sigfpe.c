/* Integer division by zero: SIGFPE, status 136. */
#include "t.h"

int main(void)
{
	volatile int zero = 0;
	SHOW("dividing by zero");
	fflush(stdout);
	return 10 / zero;
}
