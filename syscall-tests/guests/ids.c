/* Process and credential identity. The sandbox reports the caller's ids. */
#include "t.h"
#include <sys/prctl.h>

int main(void)
{
	pid_t pid = getpid();
	EXPECT_TRUE(pid > 0);
	EXPECT_TRUE(getppid() >= 0);
	EXPECT_TRUE(syscall(SYS_gettid) == pid);
	EXPECT_TRUE(getpgrp() >= 0);
	EXPECT_TRUE(getsid(0) >= 0); /* both 0 when they began outside our PID namespace */
	EXPECT_TRUE(getpgid(0) == getpgrp());
	EXPECT_ERR(getpgid(-1), ESRCH);
	SHOW("uid=%d euid=%d gid=%d egid=%d", (int)getuid(), (int)geteuid(), (int)getgid(), (int)getegid());
	uid_t r, e, s;
	EXPECT(getresuid(&r, &e, &s), 0);
	SHOW("resuid=%d,%d,%d", (int)r, (int)e, (int)s);
	gid_t gr, ge, gs;
	EXPECT(getresgid(&gr, &ge, &gs), 0);
	SHOW("resgid=%d,%d,%d", (int)gr, (int)ge, (int)gs);
	EXPECT_ERR(syscall(SYS_getresuid, BADPTR, &e, &s), EFAULT);

	/* Supplementary groups, sorted. */
	gid_t groups[256];
	int n = getgroups(256, groups);
	EXPECT_TRUE(n >= 0);
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			if (groups[j] < groups[i]) {
				gid_t t = groups[i];
				groups[i] = groups[j];
				groups[j] = t;
			}
	printf("groups(%d):", n);
	for (int i = 0; i < n; i++)
		printf(" %d", (int)groups[i]);
	printf("\n");
	EXPECT(getgroups(0, NULL), n);
	EXPECT_ERR(syscall(SYS_getgroups, -1, groups), EINVAL);
	if (n > 1)
		EXPECT_ERR(getgroups(1, groups), EINVAL);

	/* The comm name is the program's base name, truncated to 15 bytes. */
	char name[17] = {0};
	EXPECT(prctl(PR_GET_NAME, name), 0);
	SHOW("comm: %s", name);
	EXPECT(prctl(PR_SET_NAME, "renamed-guest-with-long-name"), 0);
	EXPECT(prctl(PR_GET_NAME, name), 0);
	SHOW("comm now: %s", name);
	EXPECT(prctl(PR_GET_DUMPABLE), 1);
	EXPECT_ERR(prctl(9999), EINVAL);
	return t_done();
}
