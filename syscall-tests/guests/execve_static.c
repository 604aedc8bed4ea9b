/* execve of a static binary (busybox); its exit status becomes ours. */
#include "t.h"

int main(void)
{
	SHOW("before execve");
	fflush(stdout);
	char *argv[] = {"sh", "-c", "echo static exec: $0 $1; exit 5", "zero", "one", NULL};
	char *envp[] = {NULL};
	execve("/bin/busybox", argv, envp);
	SHOW("execve failed: errno=%s", errname(errno));
	return 1;
}
