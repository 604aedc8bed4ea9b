/* abort() raises SIGABRT even if the caller ignores it: status 134. */
#include "t.h"

int main(void)
{
	t_as_child(); /* dies of its own signal: not as init */
	signal(SIGABRT, SIG_IGN);
	SHOW("calling abort");
	fflush(stdout);
	abort();
}
