/* kill(getpid(), SIGTERM) with the default action: death, status 143. */
#include "t.h"

int main(void)
{
	t_as_child(); /* dies of its own signal: not as init */
	SHOW("sending SIGTERM to self");
	fflush(stdout);
	kill(getpid(), SIGTERM);
	/* Delivery happens on return from kill; nothing after it runs. */
	SHOW("survived SIGTERM: wrong");
	return 1;
}
