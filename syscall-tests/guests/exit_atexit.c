/* exit() runs atexit handlers and flushes stdio before exit_group(42). */
#include "t.h"

static void bye(void)
{
	SHOW("atexit handler ran");
}

int main(void)
{
	setvbuf(stdout, NULL, _IOFBF, 4096);
	atexit(bye);
	printf("buffered line, flushed by exit\n");
	exit(42);
}
