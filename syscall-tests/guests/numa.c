/* NUMA policy on a machine with one node, node 0: set_mempolicy and
 * get_mempolicy (modes, mode flags, node masks past node 0, maxnode
 * limits, MPOL_F_NODE / MPOL_F_ADDR / MPOL_F_MEMS_ALLOWED), mbind per VMA
 * (holes, MPOL_MF_STRICT's EIO), migrate_pages and move_pages, and the
 * policy a forked child inherits. */
#include "t.h"
#include <sys/mman.h>

#define PG 4096
#define BIND 2
#define STATIC (1 << 15)
#define RELATIVE (1 << 14)
#define BALANCING (1 << 13)

static unsigned long mask[600];

static long setp(long mode, unsigned long first, unsigned long maxnode)
{
	memset(mask, 0, sizeof mask);
	mask[0] = first;
	return syscall(SYS_set_mempolicy, mode, mask, maxnode);
}

/* Node bit `bit` with node 0, under a maxnode just past it. */
static long set_bit(int bit)
{
	memset(mask, 0, sizeof mask);
	mask[0] = 1;
	mask[bit / 64] |= 1UL << (bit % 64);
	return syscall(SYS_set_mempolicy, BIND, mask, (unsigned long)bit + 2);
}

static int pol;
static unsigned long out[4];

static long getp(unsigned long maxnode, void *addr, unsigned long flags)
{
	pol = -1;
	memset(out, 0xff, sizeof out);
	return syscall(SYS_get_mempolicy, &pol, out, maxnode, addr, flags);
}

static long mbind_(void *p, unsigned long len, long mode, unsigned long first, unsigned flags)
{
	mask[0] = first;
	return syscall(SYS_mbind, p, len, mode, mask, 64UL, flags);
}

int main(void)
{
	/* Node masks: other nodes may be named with node 0, up to MAX_NUMNODES. */
	EXPECT(set_bit(1), 0);
	EXPECT(set_bit(64), 0);
	EXPECT(set_bit(1023), 0);
	EXPECT_ERR(set_bit(1024), EINVAL);
	EXPECT_ERR(set_bit(4095), EINVAL);
	EXPECT_ERR(setp(BIND, 2, 64), EINVAL);
	EXPECT(setp(BIND, 1, 32769), 0);
	EXPECT_ERR(setp(BIND, 1, 32770), EINVAL);
	EXPECT_ERR(setp(BIND, 1, 0), EINVAL);
	EXPECT_ERR(setp(BIND, 1, 1), EINVAL);
	EXPECT_ERR(setp(0, 1, 64), EINVAL);
	EXPECT(syscall(SYS_set_mempolicy, 0, NULL, 0UL), 0);
	EXPECT_ERR(syscall(SYS_set_mempolicy, BIND, BADPTR, 64UL), EFAULT);

	/* Modes and mode flags. */
	EXPECT_ERR(setp(7, 1, 64), EINVAL);
	EXPECT_ERR(setp(BIND | STATIC | RELATIVE, 1, 64), EINVAL);
	EXPECT_ERR(setp(BIND | (1 << 16), 1, 64), EINVAL);
	EXPECT_ERR(setp(0x80000002L, 1, 64), EINVAL);
	EXPECT(setp(0x100000002L, 1, 64), 0); /* the mode is an int */
	EXPECT_ERR(setp(1 | BALANCING, 1, 64), EINVAL);
	EXPECT_ERR(setp(4, 1, 64), EINVAL);
	EXPECT(setp(4, 0, 64), 0);
	EXPECT_ERR(setp(1 | STATIC, 0, 64), EINVAL);
	EXPECT(setp(5, 1, 64), 0);
	EXPECT(setp(6, 1, 64), 0);

	/* What get_mempolicy reads back. */
	EXPECT(setp(BIND | RELATIVE, 2, 3), 0);
	EXPECT(getp(200, NULL, 0), 0);
	SHOW("relative {1}: mode %#x mask %lx %lx %lx", pol, out[0], out[1], out[2]);
	EXPECT(setp(3 | STATIC, 0xf0f, 64), 0);
	EXPECT(getp(2, NULL, 0), 0);
	SHOW("static interleave: mode %#x mask %lx %lx", pol, out[0], out[1]);
	EXPECT(getp(1, NULL, 0), 0);
	SHOW("maxnode 1: mask %lx", out[0]);
	EXPECT(getp(64, NULL, 1), 0);
	SHOW("next interleave node %d", pol);
	EXPECT(setp(BIND, 0xf0f, 64), 0);
	EXPECT(getp(64, NULL, 0), 0);
	SHOW("bind {0-3,8-11}: mode %#x mask %lx", pol, out[0]);
	EXPECT_ERR(getp(64, NULL, 1), EINVAL);
	EXPECT(setp(1, 0, 64), 0);
	EXPECT(getp(64, NULL, 0), 0);
	SHOW("preferred, no nodes: mode %#x mask %lx", pol, out[0]);
	EXPECT(setp(BIND | BALANCING, 1, 64), 0);
	EXPECT(getp(64, NULL, 0), 0);
	SHOW("bind, balancing: mode %#x mask %lx", pol, out[0]);
	EXPECT(getp(64, NULL, 4), 0);
	SHOW("mems allowed: %d %lx", pol, out[0]);
	EXPECT_ERR(getp(0, NULL, 0), EINVAL);
	EXPECT_ERR(getp(40000, NULL, 0), EINVAL);
	EXPECT_ERR(getp(64, NULL, 8), EINVAL);
	EXPECT_ERR(getp(64, NULL, 5), EINVAL);
	EXPECT_ERR(getp(64, (void *)8, 0), EINVAL);
	EXPECT_ERR(getp(64, NULL, 3), EFAULT);
	EXPECT_ERR(syscall(SYS_get_mempolicy, BADPTR, out, 64UL, NULL, 0UL), EFAULT);
	EXPECT_ERR(syscall(SYS_get_mempolicy, &pol, BADPTR, 64UL, NULL, 0UL), EFAULT);
	EXPECT(syscall(SYS_get_mempolicy, &pol, NULL, 0UL, NULL, 0UL), 0);
	/* A big maxnode: the words past the first are cleared. */
	unsigned long big[8];
	memset(big, 0xff, sizeof big);
	EXPECT(syscall(SYS_get_mempolicy, &pol, big, 300UL, NULL, 0UL), 0);
	SHOW("maxnode 300: %lx %lx %lx %lx %lx %lx", big[0], big[1], big[2], big[3], big[4], big[5]);

	/* The policy survives fork. */
	pid_t pid = fork();
	if (pid == 0) {
		getp(64, NULL, 0);
		_exit(pol == (BIND | BALANCING) && out[0] == 1 ? 0 : 1);
	}
	int st;
	waitpid(pid, &st, 0);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	/* mbind: a policy per VMA, read with MPOL_F_ADDR. */
	char *p = mmap(NULL, 16 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT_TRUE(p != MAP_FAILED);
	EXPECT(munmap(p + 8 * PG, 8 * PG), 0);
	EXPECT(getp(64, p, 2), 0);
	SHOW("no VMA policy: mode %#x mask %lx", pol, out[0]);
	EXPECT(getp(64, p, 3), 0);
	SHOW("node of page 0: %d", pol);
	EXPECT(mbind_(p + PG, 2 * PG, BIND, 3, 0), 0);
	EXPECT(getp(64, p + 2 * PG, 2), 0);
	SHOW("page 2: mode %#x mask %lx", pol, out[0]);
	EXPECT(getp(64, p + 3 * PG, 2), 0);
	SHOW("page 3: mode %#x mask %lx", pol, out[0]);
	EXPECT(getp(64, p, 2), 0);
	SHOW("page 0: mode %#x mask %lx", pol, out[0]);
	EXPECT_ERR(getp(64, p + 8 * PG, 2), EFAULT);
	EXPECT_ERR(mbind_(p + 1, PG, BIND, 1, 0), EINVAL);
	EXPECT_ERR(mbind_(p, PG, BIND, 1, 8), EINVAL);
	EXPECT(mbind_(p, PG, BIND, 1, 7), 0);
	EXPECT(mbind_(p, 0, BIND, 1, 0), 0);
	EXPECT(mbind_(p, 1, BIND, 1, 0), 0);
	EXPECT(mbind_(p, -1UL, BIND, 1, 0), 0); /* PAGE_ALIGN wraps to 0 */
	EXPECT_ERR(mbind_(p, -(unsigned long)PG, BIND, 1, 0), EINVAL);
	EXPECT_ERR(mbind_(p, PG, 9, 1, 0), EINVAL);
	EXPECT_ERR(mbind_(p, PG, 0, 1, 0), EINVAL);
	EXPECT_ERR(mbind_(p, PG, BIND, 2, 0), EINVAL);
	EXPECT_ERR(syscall(SYS_mbind, p, PG, BIND, BADPTR, 64UL, 0), EFAULT);
	/* Holes: EFAULT, but the default policy may span them. */
	EXPECT_ERR(mbind_(p, 12 * PG, BIND, 1, 0), EFAULT);
	EXPECT(mbind_(p, 12 * PG, 0, 0, 0), 0);
	EXPECT_ERR(mbind_(p + 8 * PG, PG, 0, 0, 0), EFAULT);
	EXPECT(getp(64, p + 2 * PG, 2), 0);
	SHOW("after default over all: mode %#x", pol);
	/* MPOL_MF_STRICT: a present page outside the caller's mask. */
	p[0] = 1;
	EXPECT_ERR(mbind_(p, PG, BIND | RELATIVE, 2, 1), EIO);
	EXPECT(getp(64, p, 2), 0);
	SHOW("after EIO: mode %#x", pol);
	EXPECT(mbind_(p + PG, PG, BIND | RELATIVE, 2, 1), 0);
	EXPECT(mbind_(p, PG, BIND | RELATIVE, 2, 3), 0);
	EXPECT(getp(64, p, 2), 0);
	SHOW("relative, moved: mode %#x mask %lx", pol, out[0]);
	EXPECT_ERR(mbind_(p, PG, 4, 0, 1), EIO);
	EXPECT(mbind_(p, PG, BIND, 1, 1), 0);
	/* A VMA's policy goes with it to a fork child. */
	pid = fork();
	if (pid == 0) {
		getp(64, p, 2);
		_exit(pol == BIND && out[0] == 1 ? 0 : 1);
	}
	waitpid(pid, &st, 0);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	/* move_pages: statuses, and node 0 the only target. */
	void *pages[4] = {p, p + 3 * PG, p + 9 * PG, NULL};
	int status[4], nodes[4] = {0, 0, 0, 0};
	EXPECT(syscall(SYS_move_pages, 0, 4, pages, NULL, status, 0), 0);
	SHOW("status %d %d %d %d", status[0], status[1], status[2], status[3]);
	memset(status, 9, sizeof status);
	EXPECT(syscall(SYS_move_pages, 0, 4, pages, nodes, status, 0), 0);
	SHOW("moved to 0: %d %d %d %d", status[0], status[1], status[2], status[3]);
	nodes[1] = 1;
	status[0] = status[1] = status[2] = 99;
	EXPECT_ERR(syscall(SYS_move_pages, 0, 4, pages, nodes, status, 0), ENODEV);
	SHOW("before node 1: %d %d %d", status[0], status[1], status[2]);
	nodes[1] = -1;
	EXPECT_ERR(syscall(SYS_move_pages, 0, 4, pages, nodes, status, 0), ENODEV);
	nodes[1] = 5000;
	EXPECT_ERR(syscall(SYS_move_pages, 0, 4, pages, nodes, status, 0), ENODEV);
	EXPECT_ERR(syscall(SYS_move_pages, 0, 4, pages, nodes, status, 8), EINVAL);
	EXPECT_ERR(syscall(SYS_move_pages, 999999, 4, pages, nodes, status, 0), ESRCH);
	EXPECT(syscall(SYS_move_pages, 0, 0, pages, nodes, status, 0), 0);
	EXPECT_ERR(syscall(SYS_move_pages, 0, 1, BADPTR, NULL, status, 0), EFAULT);
	EXPECT_ERR(syscall(SYS_move_pages, 0, 1, pages, NULL, BADPTR, 0), EFAULT);
	EXPECT(syscall(SYS_move_pages, getpid(), 1, pages, NULL, status, 0), 0);
	SHOW("by pid: %d", status[0]);

	/* migrate_pages: to node 0 only. */
	unsigned long from = 1, to = 1;
	EXPECT(syscall(SYS_migrate_pages, 0, 64UL, &from, &to), 0);
	to = 3;
	EXPECT(syscall(SYS_migrate_pages, 0, 64UL, &from, &to), 0);
	to = 2;
	EXPECT_ERR(syscall(SYS_migrate_pages, 0, 64UL, &from, &to), EINVAL);
	to = 0;
	EXPECT_ERR(syscall(SYS_migrate_pages, 0, 64UL, &from, &to), EINVAL);
	EXPECT_ERR(syscall(SYS_migrate_pages, 999999, 64UL, &from, &to), ESRCH);
	EXPECT_ERR(syscall(SYS_migrate_pages, getpid(), 64UL, &from, BADPTR), EFAULT);
	return t_done();
}
