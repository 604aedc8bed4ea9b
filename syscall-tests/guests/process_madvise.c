/* process_madvise(2) and process_mrelease(2): advice over an iovec in the
 * caller's own memory (MADV_DONTNEED empties the pages), hints into a
 * child's, and their errors: flags, advice a child's memory does not
 * take, a descriptor that is no pidfd, an unmapped range; mrelease of a
 * process that is not dying. And process_vm_readv/writev of the child's
 * memory, which share the same check of the target. */
#include "t.h"

#include <sys/uio.h>

#define PG 4096

int main(void)
{
	int me = syscall(SYS_pidfd_open, getpid(), 0);
	EXPECT_TRUE(me >= 0);
	char *p = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(p, 7, 4 * PG);
	struct iovec v[2] = { { p, PG }, { p + 2 * PG, 2 * PG } };
	EXPECT(syscall(SYS_process_madvise, me, v, 2, MADV_COLD, 0), 3 * PG);
	EXPECT(syscall(SYS_process_madvise, me, v, 2, MADV_DONTNEED, 0), 3 * PG);
	EXPECT(p[0] + p[PG] + p[2 * PG], 7);
	EXPECT_ERR(syscall(SYS_process_madvise, me, v, 2, MADV_COLD, 1), EINVAL);
	EXPECT_ERR(syscall(SYS_process_madvise, me, v, 2, 12345, 0), EINVAL);
	EXPECT_ERR(syscall(SYS_process_madvise, 0, v, 2, MADV_COLD, 0), EBADF);
	EXPECT_ERR(syscall(SYS_process_madvise, me, v, 2000, MADV_COLD, 0), EINVAL);
	munmap(p + 2 * PG, 2 * PG);
	/* The first range advised, the second unmapped: the bytes before. */
	EXPECT(syscall(SYS_process_madvise, me, v, 2, MADV_COLD, 0), PG);
	struct iovec gone = { p + 2 * PG, PG };
	EXPECT_ERR(syscall(SYS_process_madvise, me, &gone, 1, MADV_COLD, 0), ENOMEM);

	fflush(stdout);
	pid_t kid = fork();
	if (kid == 0) {
		pause();
		_exit(0);
	}
	int pk = syscall(SYS_pidfd_open, kid, 0);
	/* Same addresses in the child: its copy of the first page. */
	struct iovec first = { p, PG };
	EXPECT(syscall(SYS_process_madvise, pk, &first, 1, MADV_COLD, 0), PG);
	EXPECT(syscall(SYS_process_madvise, pk, &first, 1, MADV_WILLNEED, 0), PG);
	EXPECT_ERR(syscall(SYS_process_madvise, pk, &first, 1, MADV_DONTNEED, 0), EINVAL);
	EXPECT_ERR(syscall(SYS_process_madvise, pk, &gone, 1, MADV_COLD, 0), ENOMEM);
	EXPECT_ERR(syscall(SYS_process_mrelease, pk, 0), EINVAL);
	EXPECT_ERR(syscall(SYS_process_mrelease, pk, 1), EINVAL);
	EXPECT_ERR(syscall(SYS_process_mrelease, me, 0), EINVAL);
	/* The child's copy of page 2 (now empty here) still holds 7s. */
	char got[4] = { 0 };
	struct iovec local = { got, sizeof got }, remote = { p + PG, sizeof got };
	EXPECT(process_vm_readv(kid, &local, 1, &remote, 1, 0), 4);
	EXPECT(got[0] + got[3], 14);
	memcpy(got, "abcd", 4);
	EXPECT(process_vm_writev(kid, &local, 1, &remote, 1, 0), 4);
	memset(got, 0, 4);
	EXPECT(process_vm_readv(kid, &local, 1, &remote, 1, 0), 4);
	EXPECT(got[3], 'd');
	EXPECT_ERR(process_vm_readv(kid, &local, 1, &remote, 1, 1), EINVAL);
	EXPECT_ERR(process_vm_readv(kid, &local, 1, &gone, 1, 0), EFAULT);
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
	return t_done();
}
