/* /proc/PID/pagemap (issue 20, Documentation/admin-guide/mm/pagemap.rst):
 * 8 bytes per page, bit 63 for a present page (touched, not given back),
 * bit 61 for a shared one; EINVAL for an offset or count that is not a
 * whole entry; nothing past user space; the ptrace access check. Frame
 * numbers differ (natively root sees them), so only the flag bits are
 * compared. */
#include "t.h"
#include <sys/mman.h>

#define PRESENT (1ULL << 63)
#define FILE_OR_SHARED (1ULL << 61)

static int fd;

static uint64_t entry(const void *addr)
{
	uint64_t e = ~0ULL;
	if (pread(fd, &e, 8, (uintptr_t)addr / 4096 * 8) != 8)
		return ~0ULL;
	return e;
}

static void other_user(void)
{
	pid_t parent = getppid();
	EXPECT(setuid(65534), 0);
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/pagemap", parent);
	EXPECT_ERR(open(path, O_RDONLY), EACCES);
}

int main(void)
{
	fd = open("/proc/self/pagemap", O_RDONLY);
	EXPECT_TRUE(fd >= 0);
	struct stat st;
	EXPECT(fstat(fd, &st), 0);
	EXPECT_TRUE(S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0400 && st.st_size == 0);

	char *p = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT_TRUE(p != MAP_FAILED);
	p[0] = 1;
	p[2 * 4096] = 1;
	for (int i = 0; i < 4; i++) {
		uint64_t e = entry(p + i * 4096);
		SHOW("page %d present %d shared %d", i, !!(e & PRESENT), !!(e & FILE_OR_SHARED));
	}
	/* Four entries in one read, at the file position. */
	uint64_t four[4];
	EXPECT_TRUE(lseek(fd, (uintptr_t)p / 4096 * 8, SEEK_SET) == (off_t)((uintptr_t)p / 4096 * 8));
	EXPECT(read(fd, four, sizeof four), 32);
	EXPECT_TRUE((four[0] & PRESENT) && !(four[1] & PRESENT) && (four[2] & PRESENT) &&
		    !(four[3] & PRESENT));
	EXPECT_TRUE(lseek(fd, 0, SEEK_CUR) == (off_t)((uintptr_t)p / 4096 * 8 + 32));
	/* Given back: no longer present. */
	EXPECT(madvise(p, 4096, MADV_DONTNEED), 0);
	SHOW("after DONTNEED present %d", !!(entry(p) & PRESENT));
	/* Unmapped: 0. */
	EXPECT(munmap(p + 3 * 4096, 4096), 0);
	SHOW("unmapped entry %llx", (unsigned long long)(entry(p + 3 * 4096) & (PRESENT | FILE_OR_SHARED)));
	/* Shared anonymous memory is shmem: present and "file". */
	char *s = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	s[0] = 1;
	uint64_t e = entry(s);
	SHOW("shared present %d shared %d", !!(e & PRESENT), !!(e & FILE_OR_SHARED));
	/* The stack is present. */
	volatile char here = 1;
	SHOW("stack present %d", !!(entry((const void *)&here) & PRESENT));

	/* Whole entries only; zero bytes is zero. */
	char b[16];
	EXPECT_ERR(pread(fd, b, 8, 4), EINVAL);
	EXPECT_ERR(pread(fd, b, 7, 0), EINVAL);
	EXPECT_ERR(pread(fd, b, 12, 8), EINVAL);
	EXPECT(pread(fd, b, 0, 0), 0);
	/* Page 0 is never mapped. */
	EXPECT(pread(fd, b, 8, 0), 8);
	EXPECT_TRUE(!(*(uint64_t *)b & PRESENT));
	/* Past user space (47 bits less a page): end of file. */
	EXPECT(pread(fd, b, 8, ((1ULL << 47) - 4096) / 4096 * 8), 0);
	EXPECT(pread(fd, b, 16, ((1ULL << 47) - 4096) / 4096 * 8 - 8), 8);
	EXPECT(pread(fd, b, 8, 1ULL << 60), 0);
	/* A big read across VMAs and holes. */
	static uint64_t many[1 << 14];
	EXPECT(pread(fd, many, sizeof many, (uintptr_t)p / 4096 * 8 - sizeof many / 2),
	       (long)sizeof many);
	EXPECT_TRUE(many[sizeof many / 16 + 2] & PRESENT);

	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		t_failures = 0;
		other_user();
		fflush(stdout);
		_exit(t_failures ? 1 : 0);
	}
	int stt;
	EXPECT_TRUE(waitpid(c, &stt, 0) == c);
	EXPECT_TRUE(WIFEXITED(stt) && WEXITSTATUS(stt) == 0);
	return t_done();
}
