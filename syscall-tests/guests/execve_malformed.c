/* execve of malformed programs (fixtures made by build.rs): Linux's errno
 * for each bad ELF header, PT_INTERP and #! line (binfmt_elf and
 * binfmt_script), and odd programs that still run.
 *
 * With the argument "reserved" (run in the sandbox only): a segment where
 * the platform keeps its own pages fails with ENOMEM, where Linux, having
 * the room, runs the program. */
#include "t.h"

/* execve of the fixture `name`, with that as argv[0]. */
static int exec(const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", FIXTURES, name);
	char *argv[] = {(char *)name, NULL};
	char *envp[] = {NULL};
	return execve(path, argv, envp);
}

/* Runs the fixture `name` in a child and returns its status as a shell
 * shows it. With `may_fail` a failed execve exits 0 too: for programs
 * Linux runs but the sandbox refuses (an i386 program, segments in the
 * pages the platform keeps), which must fail cleanly, not crash. */
static int run(const char *name, int may_fail)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		exec(name);
		if (may_fail)
			_exit(0);
		printf("%s: execve failed: errno=%s\n", name, errname(errno));
		_exit(127);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "reserved") == 0) {
		EXPECT_ERR(exec("elf_stub_addr"), ENOMEM);
		return t_done();
	}

	/* ELF headers: anything binfmt_elf does not take is ENOEXEC. */
	EXPECT(run("elf_ok", 0), 0);
	EXPECT_ERR(exec("elf_truncated"), ENOEXEC);
	EXPECT_ERR(exec("elf_phnum0"), ENOEXEC);
	EXPECT_ERR(exec("elf_phentsize"), ENOEXEC);
	EXPECT_ERR(exec("elf_phoff_eof"), ENOEXEC);
	EXPECT(run("elf_phnum1170", 0), 0);
	EXPECT_ERR(exec("elf_phnum1171"), ENOEXEC);
	EXPECT(run("elf32", 1), 0);
	EXPECT(run("elf_stub_addr", 1), 0);
	EXPECT(run("elf_low_addr", 1), 0);

	/* PT_INTERP: the name's checks are ENOEXEC, reading it EIO, opening
	 * the interpreter open_exec's errors, the interpreter's header EIO
	 * when short and ELIBBAD when not an x86-64 ELF. */
	EXPECT_ERR(exec("interp_dir"), EACCES);
	EXPECT_ERR(exec("interp_nonul"), ENOEXEC);
	EXPECT_ERR(exec("interp_script"), EIO);
	EXPECT_ERR(exec("interp_text"), ELIBBAD);
	EXPECT_ERR(exec("interp_elf32"), ELIBBAD);
	EXPECT_ERR(exec("interp_missing"), ENOENT);
	EXPECT_ERR(exec("interp_noexec"), EACCES);
	/* An empty name is the working directory, /. */
	EXPECT_ERR(exec("interp_empty"), EACCES);
	EXPECT_ERR(exec("interp_short"), ENOEXEC);
	EXPECT_ERR(exec("interp_name_max"), ENAMETOOLONG);
	EXPECT_ERR(exec("interp_path_max"), ENOEXEC);
	EXPECT_ERR(exec("interp_eof"), EIO);

	/* #! lines. */
	EXPECT_ERR(exec("shebang_long"), ENOEXEC);
	EXPECT(run("shebang_long_arg", 0), 0);
	EXPECT(run("shebang_nul", 0), 0);
	/* An empty name (a NUL first) is the working directory. */
	EXPECT_ERR(exec("shebang_nul_name"), EACCES);
	EXPECT_ERR(exec("shebang_empty"), ENOEXEC);
	EXPECT_ERR(exec("shebang_blank"), ENOEXEC);
	EXPECT_ERR(exec("shebang_dir"), EACCES);
	EXPECT_ERR(exec("shebang_noexec"), EACCES);
	EXPECT(run("nest4", 0), 0);
	EXPECT(run("nest5", 0), 0);
	EXPECT_ERR(exec("nest6"), ELOOP);
	return t_done();
}
