/* abort() raises SIGABRT even if the caller ignores it: status 134. */
#include "t.h"

int main(void)
{
	signal(SIGABRT, SIG_IGN);
	SHOW("calling abort");
	fflush(stdout);
	abort();
}
