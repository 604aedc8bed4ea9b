/* A random-syscall fuzzer, run inside the sandbox only (tests/fuzz.rs):
 *   fuzz SEED SECONDS
 * Forks a child per 1,000 calls; each child drops to uid 65534 and makes
 * calls with random numbers (0..460, a few beyond, x32 and negative ones)
 * and random arguments: small and huge integers, -1, flags-like bit sets,
 * and pointers to good memory, to a guard page, to the kernel half, to the
 * stub's pages. A child that hangs is killed after two seconds. Prints
 * "fuzz: N calls in M children" and exits 0 when the time is up; the
 * sandbox ending any other way is the finding. Deterministic per seed. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t state;

static uint64_t next(void)
{
	/* splitmix64 */
	uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static char *good, *guard;

static uint64_t arg(void)
{
	switch (next() % 12) {
	case 0: return 0;
	case 1: return next() % 16;
	case 2: return (uint64_t)-1;
	case 3: return next();
	case 4: return (uint64_t)(good + next() % 4096);
	case 5: return (uint64_t)guard;
	case 6: return 0xffff800000000000ULL + (next() & 0xfffff000);
	case 7: return 0x7fffffe00000ULL + (next() % 0x2000);
	case 8: return 1ULL << (next() % 64);
	case 9: return next() & 0xffff;
	case 10: return (uint64_t)(good + 4096 - next() % 64);
	default: return next() % 4096;
	}
}

static long number(void)
{
	switch (next() % 20) {
	case 0: return 0x40000000 | (next() % 548); /* x32 */
	case 1: return 461 + next() % 600;
	case 2: return -(long)(next() % 8) - 1;
	default: return next() % 461;
	}
}

/* Calls that would only end or stall the child, or that the parent needs
 * to outlive: skipped, not because the sandbox must not see them. */
static int skipped(long nr)
{
	switch (nr) {
	case SYS_exit: case SYS_exit_group: case SYS_pause: case SYS_vfork:
	case SYS_rt_sigreturn: case SYS_rt_sigsuspend:
		return 1;
	}
	return 0;
}

static void child(void)
{
	if (setgid(65534) || setuid(65534))
		_exit(2);
	alarm(2);
	for (int i = 0; i < 1000; i++) {
		long nr = number();
		if (skipped(nr))
			continue;
		uint64_t a[6];
		for (int j = 0; j < 6; j++)
			a[j] = arg();
		syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
		/* Keep the good page good and this process itself. */
		if (getuid() != 65534)
			_exit(3);
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: fuzz SEED SECONDS\n");
		return 2;
	}
	uint64_t seed = strtoull(argv[1], NULL, 0);
	int secs = atoi(argv[2]);
	good = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	guard = good + 4096;
	mprotect(guard, 4096, PROT_NONE);
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	long children = 0;
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec >= secs)
			break;
		/* Each child's calls depend on the seed and its index only. */
		state = seed * 1000003 + (uint64_t)children;
		memset(good, 0, 4096);
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0)
			child();
		if (pid < 0) {
			perror("fuzz: fork");
			return 1;
		}
		children++;
		/* Wait up to three seconds, then kill (the alarm may be blocked). */
		int st = 0;
		for (int ms = 0; waitpid(pid, &st, WNOHANG) == 0; ms++) {
			if (ms == 3000)
				kill(pid, SIGKILL);
			struct timespec t = {0, 1000000};
			nanosleep(&t, NULL);
		}
		/* Whatever the child left behind (its own children) goes too: as
		 * the sandbox's init, kill(-1) reaches every other process. */
		if (getpid() == 1)
			kill(-1, SIGKILL);
		while (waitpid(-1, &st, getpid() == 1 ? 0 : WNOHANG) > 0)
			;
	}
	printf("fuzz: %ld calls in %ld children\n", children * 1000, children);
	return 0;
}
