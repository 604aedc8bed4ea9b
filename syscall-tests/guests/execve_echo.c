/* execve of a dynamically linked /bin/echo replaces the program. */
#include "t.h"

int main(void)
{
	SHOW("before execve");
	fflush(stdout);
	char *argv[] = {"echo", "hello", "from", "execve", NULL};
	char *envp[] = {"PATH=/usr/bin:/bin", NULL};
	execve("/bin/echo", argv, envp);
	SHOW("execve failed: errno=%s", errname(errno));
	return 1;
}
