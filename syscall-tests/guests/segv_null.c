/* A NULL dereference with no handler: SIGSEGV, status 139. */
#include "t.h"

int main(void)
{
	SHOW("dereferencing NULL");
	fflush(stdout);
	volatile int *p = NULL;
	return *p;
}
