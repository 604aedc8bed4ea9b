/*
 * sysv.h - helpers shared by the System V IPC guests.
 */
#ifndef SYSV_H
#define SYSV_H

#include "t.h"

/* The exit status of child `c` (1000 plus the signal if it was killed, -1
 * if it could not be waited for). */
T_UNUSED static int exit_code(pid_t c)
{
	int st = -1;
	if (waitpid(c, &st, 0) != c)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
}

/* Reads /proc/sysvipc/`name`, prints its header line and returns the
 * lines after it (one per object). */
T_UNUSED static const char *sysvipc_table(const char *name)
{
	static char buf[4096];
	char path[64];
	snprintf(path, sizeof path, "/proc/sysvipc/%s", name);
	FILE *f = fopen(path, "r");
	EXPECT_TRUE(f != NULL);
	size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
	buf[n] = 0;
	if (f)
		fclose(f);
	char *nl = strchr(buf, '\n');
	EXPECT_TRUE(nl != NULL);
	if (nl)
		*nl = 0;
	SHOW("%s header: [%s]", name, buf);
	return nl ? nl + 1 : "";
}

#endif
