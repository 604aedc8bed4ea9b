/* execve failures, then a #! script whose exit status (3) becomes ours. */
#include "t.h"

int main(void)
{
	char *argv[] = {"prog", NULL};
	char *envp[] = {NULL};
	EXPECT_ERR(execve("/nonexistent/prog", argv, envp), ENOENT);
	EXPECT_ERR(execve(FIX("missing"), argv, envp), ENOENT);
	EXPECT_ERR(execve(FIX("dir"), argv, envp), EACCES);
	EXPECT_ERR(execve(FIX("noexec.txt"), argv, envp), EACCES);
	EXPECT_ERR(execve(FIX("notelf"), argv, envp), ENOEXEC);
	EXPECT_ERR(execve(FIX("empty"), argv, envp), EACCES);
	EXPECT_ERR(execve(FIX("file.txt/x"), argv, envp), ENOTDIR);
	EXPECT_ERR(execve(FIX("loop_a"), argv, envp), ELOOP);
	EXPECT_ERR(execve(FIX("dangling"), argv, envp), ENOENT);
	/* A #! line naming a missing interpreter. */
	EXPECT_ERR(execve(FIX("script_badinterp.sh"), argv, envp), ENOENT);
	EXPECT_ERR(execve(FIX(""), argv, envp), EACCES);
	EXPECT_ERR(execve("", argv, envp), ENOENT);
	EXPECT_ERR(syscall(SYS_execve, BADPTR, argv, envp), EFAULT);
	EXPECT_ERR(syscall(SYS_execve, "/bin/true", BADPTR, envp), EFAULT);
	EXPECT_ERR(syscall(SYS_execve, "/bin/true", argv, BADPTR), EFAULT);
	char *badargv[] = {"prog", BADPTR, NULL};
	EXPECT_ERR(syscall(SYS_execve, "/bin/true", badargv, envp), EFAULT);
	/* execveat with AT_EMPTY_PATH on a non-executable fd. */
	int fd = EXPECT(open(FIX("noexec.txt"), O_RDONLY), 3);
	EXPECT_ERR(syscall(SYS_execveat, fd, "", argv, envp, AT_EMPTY_PATH), EACCES);
	EXPECT(close(fd), 0);
	SHOW("failures so far=%d", t_failures);
	fflush(stdout);
	char *sargv[] = {"script", "one", "two words", NULL};
	execve(FIX("script.sh"), sargv, envp);
	SHOW("execve of script failed: errno=%s", errname(errno));
	return 1;
}
