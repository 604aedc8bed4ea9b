/*
 * fork_exec_wait N [PROGRAM]: N times forks, execs PROGRAM (default
 * /bin/true) in the child and reaps it with wait4 in the parent; prints the
 * loop's duration in nanoseconds.
 *
 * This is what a shell or a build tool does for every command: copy the
 * address space, replace it with a fresh image (a dynamic one, so the loader
 * maps its libraries too), exit, and deliver SIGCHLD and the exit status to
 * the parent. One untimed round runs first, so the sandbox's first look-up
 * and load of PROGRAM and its libraries (a cold walk through the gofer)
 * stays out of the per-iteration time.
 *
 * The child gets an empty environment: `cargo bench` sets LD_LIBRARY_PATH to
 * four directories, and the loader would try each (and its glibc-hwcaps
 * subdirectories) for every library before the system paths. Those failed
 * opens cost little natively but a gofer round trip each in the sandbox,
 * where they made a round several times slower under cargo than without.
 */
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest_common.h"

/* One fork + execve + wait4; exits the guest if any step fails. */
static void fork_exec_wait(const char *program)
{
	char *const child_argv[] = {(char *)program, NULL};
	char *const child_envp[] = {NULL};
	int status;
	pid_t pid = fork();

	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pid == 0) {
		execve(program, child_argv, child_envp);
		/* Only reached when execve failed; 127 as a shell would. */
		perror(program);
		_exit(127);
	}
	if (wait4(pid, &status, 0, NULL) != pid) {
		perror("wait4");
		exit(1);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "%s: child ended with status %#x\n", program,
			status);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	uint64_t n = parse_iterations(argc, argv);
	const char *program = argc > 2 ? argv[2] : "/bin/true";
	uint64_t start, end;

	fork_exec_wait(program);

	start = now_ns();
	for (uint64_t i = 0; i < n; i++)
		fork_exec_wait(program);
	end = now_ns();

	report_ns(start, end);
	return 0;
}
