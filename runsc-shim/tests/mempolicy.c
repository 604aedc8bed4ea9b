/* Prints the NUMA policy of the calling thread, as get_mempolicy(2) reads
 * it, and of a forked child, which inherits it. Given "MODE MASK" it first
 * sets that policy itself and runs itself again: the native half of a
 * comparison with a container given linux.memoryPolicy. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MODE_FLAGS (7 << 13)

static void show(const char *who)
{
	int mode = -1;
	unsigned long mask[16] = {0};
	if (syscall(SYS_get_mempolicy, &mode, mask, 16 * 64UL, 0UL, 0UL) != 0) {
		printf("%s: get_mempolicy: %s\n", who, strerror(errno));
		return;
	}
	printf("%s: mode %d flags %#x nodes %#lx\n", who, mode & ~MODE_FLAGS,
	       mode & MODE_FLAGS, mask[0]);
}

int main(int argc, char **argv)
{
	if (argc == 3) {
		unsigned long mask = strtoul(argv[2], NULL, 0);
		if (syscall(SYS_set_mempolicy, atoi(argv[1]), mask ? &mask : NULL,
			    mask ? 65UL : 0UL) != 0) {
			printf("set_mempolicy: %s\n", strerror(errno));
			return 1;
		}
		char *again[] = {argv[0], NULL};
		execv("/proc/self/exe", again);
		return 2;
	}
	show("first");
	fflush(stdout);
	pid_t child = fork();
	if (child == 0) {
		show("child");
		return 0;
	}
	waitpid(child, NULL, 0);
	return 0;
}
