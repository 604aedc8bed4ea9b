/* The environment passed to execve is exactly what the new program sees. */
#include "t.h"

int main(void)
{
	char *argv[] = {"env", NULL};
	char *envp[] = {"ALPHA=1", "BETA=two words", "EMPTY=", "GAMMA=a=b=c", NULL};
	execve("/usr/bin/env", argv, envp);
	SHOW("execve failed: errno=%s", errname(errno));
	return 1;
}
