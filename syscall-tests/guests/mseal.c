/* mseal(2): the argument checks (flags, alignment, overflow, holes with
 * nothing sealed), then what a seal refuses with EPERM: munmap, mremap
 * (from and onto it), mmap(MAP_FIXED) over it, mprotect, and the advice
 * that discards read-only anonymous memory; what it allows (madvise of
 * writable, shared or file memory, access, sealing again); and a fork
 * child's copy is sealed too. */
#include "t.h"
#include <sys/mman.h>

#define PG 4096
#ifndef SYS_mseal
#define SYS_mseal 462
#endif

static long seal(void *p, unsigned long len, unsigned long flags)
{
	return syscall(SYS_mseal, p, len, flags);
}

static char *map(int prot, int flags)
{
	return mmap(NULL, 4 * PG, prot, flags | MAP_ANONYMOUS, -1, 0);
}

int main(void)
{
	char *p = map(PROT_READ | PROT_WRITE, MAP_PRIVATE);
	EXPECT_TRUE(p != MAP_FAILED);
	EXPECT_ERR(seal(p, PG, 1), EINVAL);
	EXPECT_ERR(seal(p + 1, PG, 0), EINVAL);
	EXPECT_ERR(seal(p, -1UL, 0), EINVAL);
	EXPECT_ERR(seal(p, -(unsigned long)PG, 0), EINVAL);
	EXPECT(seal(p, 0, 0), 0);
	EXPECT_ERR(seal(p + 1, 0, 0), EINVAL); /* alignment comes first */
	/* A hole anywhere is ENOMEM, and nothing is sealed. */
	EXPECT(munmap(p + 2 * PG, PG), 0);
	EXPECT_ERR(seal(p, 4 * PG, 0), ENOMEM);
	EXPECT_ERR(seal(p + 2 * PG, PG, 0), ENOMEM);
	EXPECT(munmap(p, 4 * PG), 0);
	EXPECT_ERR(seal(p, PG, 0), ENOMEM);

	/* Seal pages 1 and 2 of four. */
	p = map(PROT_READ | PROT_WRITE, MAP_PRIVATE);
	p[PG] = 7;
	EXPECT(seal(p + PG, 2 * PG, 0), 0);
	EXPECT(seal(p + PG, PG, 0), 0); /* again: no error */
	EXPECT_ERR(munmap(p + PG, PG), EPERM);
	EXPECT_ERR(munmap(p, 4 * PG), EPERM);
	EXPECT_ERR(munmap(p + 2 * PG, 2 * PG), EPERM);
	EXPECT(munmap(p + 3 * PG, PG), 0);
	EXPECT_ERR(mprotect(p + PG, PG, PROT_READ), EPERM);
	EXPECT_ERR(mprotect(p + PG, PG, PROT_READ | PROT_WRITE), EPERM);
	EXPECT(mprotect(p, PG, PROT_READ), 0);
	EXPECT_MAP_ERR(mremap(p + PG, PG, 2 * PG, MREMAP_MAYMOVE), EPERM);
	EXPECT_MAP_ERR(mremap(p + PG, 2 * PG, PG, 0), EPERM);
	EXPECT_MAP_ERR(mremap(p + PG, PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED, p + 3 * PG), EPERM);
	char *q = map(PROT_READ | PROT_WRITE, MAP_PRIVATE);
	EXPECT_MAP_ERR(mremap(q, PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED, p + PG), EPERM);
	EXPECT_MAP_ERR(mmap(p + PG, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), EPERM);
	EXPECT_MAP_ERR(mmap(p, 2 * PG, PROT_READ, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0), EPERM);
	EXPECT_MAP_ERR(mmap(p + PG, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0), EEXIST);
	/* Writable memory may still be discarded; the pages stay usable. */
	EXPECT(madvise(p + PG, PG, MADV_WILLNEED), 0);
	EXPECT(madvise(p + PG, PG, MADV_DONTNEED), 0);
	SHOW("after MADV_DONTNEED: %d", p[PG]);
	p[2 * PG] = 3;
	SHOW("sealed page written: %d", p[2 * PG]);

	/* Read-only anonymous memory keeps its contents. */
	char *r = map(PROT_READ | PROT_WRITE, MAP_PRIVATE);
	r[0] = 5;
	EXPECT(mprotect(r, 4 * PG, PROT_READ), 0);
	EXPECT(seal(r, 4 * PG, 0), 0);
	EXPECT_ERR(madvise(r, PG, MADV_DONTNEED), EPERM);
	EXPECT_ERR(madvise(r, PG, MADV_FREE), EPERM);
	EXPECT_ERR(madvise(r, PG, MADV_DONTFORK), EPERM);
	EXPECT_ERR(madvise(r, PG, MADV_WIPEONFORK), EPERM);
	EXPECT_ERR(madvise(r, PG, MADV_DONTNEED_LOCKED), EPERM);
	EXPECT(madvise(r, PG, MADV_WILLNEED), 0);
	EXPECT(madvise(r, PG, MADV_NORMAL), 0);
	SHOW("read-only sealed page: %d", r[0]);
	/* Shared memory and files lose nothing by a discard. */
	char *s = map(PROT_READ, MAP_SHARED);
	EXPECT(seal(s, 4 * PG, 0), 0);
	EXPECT(madvise(s, PG, MADV_DONTNEED), 0);
	int fd = open(FIX("file.txt"), O_RDONLY);
	char *f = mmap(NULL, PG, PROT_READ, MAP_PRIVATE, fd, 0);
	EXPECT_TRUE(f != MAP_FAILED);
	EXPECT(seal(f, PG, 0), 0);
	EXPECT(madvise(f, PG, MADV_DONTNEED), 0);
	SHOW("file page: %.5s", f);
	EXPECT_ERR(munmap(f, PG), EPERM);

	/* A fork child's copy is sealed. */
	pid_t pid = fork();
	if (pid == 0)
		_exit(munmap(p + PG, PG) == -1 && errno == EPERM ? 0 : 1);
	int st;
	waitpid(pid, &st, 0);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return t_done();
}
