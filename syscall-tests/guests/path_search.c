/* Search permission on the directories of a path: a walk through a
 * directory the caller may not search is EACCES, whatever the file's own
 * bits and whether the name exists; searching needs no read permission;
 * `.`, `..` and a symlink's target are walked the same way; chdir needs it
 * on the directory itself. Root walks anywhere (CAP_DAC_READ_SEARCH), a
 * process that left uid 0 does not; /proc/self/status shows its new ids. */
#include "t.h"
#include <grp.h>

static char dir[64], closed[96], xonly[96], sub[128];

static void path(char *out, size_t n, const char *base, const char *rest)
{
	snprintf(out, n, "%s/%s", base, rest);
}

static void as_user(void)
{
	struct stat st;
	char p[192];
	gid_t groups[] = {7, 5};
	EXPECT(setgroups(2, groups), 0);
	EXPECT(setresgid(1000, 1001, 1002), 0);
	EXPECT(setresuid(1000, 1001, 1002), 0);
	/* /proc shows the ids as they now are (real, effective, saved,
	 * file-system) and the groups in the order given. */
	char status[4096];
	long n = t_slurp("/proc/self/status", status, sizeof status);
	EXPECT_TRUE(n > 0);
	for (char *line = strtok(status, "\n"); line; line = strtok(NULL, "\n"))
		if (!strncmp(line, "Uid:", 4) || !strncmp(line, "Gid:", 4) ||
		    !strncmp(line, "Groups:", 7))
			SHOW("%s", line);
	path(p, sizeof p, closed, "f");
	EXPECT_ERR(stat(p, &st), EACCES);
	EXPECT_ERR(open(p, O_RDONLY), EACCES);
	EXPECT_ERR(access(p, F_OK), EACCES);
	path(p, sizeof p, closed, "missing");
	EXPECT_ERR(stat(p, &st), EACCES);
	EXPECT_ERR(open(p, O_RDONLY | O_CREAT, 0600), EACCES);
	path(p, sizeof p, sub, ".");
	EXPECT_ERR(stat(p, &st), EACCES);
	/* The directory itself is looked up in one that may be searched. */
	EXPECT(stat(closed, &st), 0);
	EXPECT_ERR(chdir(closed), EACCES);
	/* Search without read: names can be walked, not listed. */
	path(p, sizeof p, xonly, "f");
	EXPECT(stat(p, &st), 0);
	int fd = open(p, O_RDONLY);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	EXPECT_ERR(open(xonly, O_RDONLY | O_DIRECTORY), EACCES);
	EXPECT(chdir(xonly), 0);
	EXPECT(stat("f", &st), 0);
	EXPECT(stat(".", &st), 0);
	EXPECT_ERR(stat("../closed/f", &st), EACCES);
	EXPECT(stat("../xonly/./f", &st), 0);
	/* A symlink's target is walked as the caller too. */
	path(p, sizeof p, dir, "link");
	EXPECT_ERR(stat(p, &st), EACCES);
	EXPECT(lstat(p, &st), 0);
	fflush(stdout);
	_exit(t_failures);
}

int main(void)
{
	struct stat st;
	char p[192];
	snprintf(dir, sizeof dir, "/tmp/path-search-%d", (int)getpid());
	EXPECT(mkdir(dir, 0755), 0);
	path(closed, sizeof closed, dir, "closed");
	path(xonly, sizeof xonly, dir, "xonly");
	EXPECT(mkdir(closed, 0700), 0);
	EXPECT(mkdir(xonly, 0711), 0);
	path(sub, sizeof sub, closed, "sub");
	EXPECT(mkdir(sub, 0755), 0);
	path(p, sizeof p, closed, "f");
	EXPECT(close(open(p, O_WRONLY | O_CREAT, 0644)), 0);
	path(p, sizeof p, xonly, "f");
	EXPECT(close(open(p, O_WRONLY | O_CREAT, 0644)), 0);
	path(p, sizeof p, dir, "link");
	EXPECT(symlink("closed/f", p), 0);
	/* Root walks anywhere. */
	path(p, sizeof p, closed, "f");
	EXPECT(stat(p, &st), 0);
	path(p, sizeof p, sub, ".");
	EXPECT(stat(p, &st), 0);

	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		as_user();
	int status = 0;
	EXPECT_TRUE(waitpid(pid, &status, 0) == pid);
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	path(p, sizeof p, dir, "link");
	unlink(p);
	path(p, sizeof p, closed, "f");
	unlink(p);
	path(p, sizeof p, xonly, "f");
	unlink(p);
	rmdir(sub);
	rmdir(closed);
	rmdir(xonly);
	EXPECT(rmdir(dir), 0);
	return t_done();
}
