/* /proc/PID/mem: the file offset is an address; reads and writes go as a
 * tracer's would (read-only private pages are written, shared read-only
 * ones are not), and stop at the first page that cannot be reached. */
#include "t.h"
#include <sys/mman.h>
#include <sys/wait.h>

static char data[64] = "the quick brown fox";

int main(void)
{
	char buf[64], path[64];
	int fd = CHECK(open("/proc/self/mem", O_RDWR));
	EXPECT_TRUE(fd >= 0);

	/* A read at an address gives the bytes there. */
	EXPECT(pread(fd, buf, 19, (off_t)(uintptr_t)data), 19);
	EXPECT_TRUE(memcmp(buf, data, 19) == 0);
	EXPECT(pread(fd, buf, 0, (off_t)(uintptr_t)data), 0);

	/* lseek moves to an address; read advances the offset. */
	EXPECT_TRUE(lseek(fd, (off_t)(uintptr_t)data + 4, SEEK_SET) == (off_t)(uintptr_t)data + 4);
	EXPECT(read(fd, buf, 5), 5);
	EXPECT_TRUE(memcmp(buf, "quick", 5) == 0);
	EXPECT(read(fd, buf, 6), 6);
	EXPECT_TRUE(memcmp(buf, " brown", 6) == 0);

	/* A write lands in the process's memory. */
	EXPECT(pwrite(fd, "QUICK", 5, (off_t)(uintptr_t)data + 4), 5);
	EXPECT_TRUE(memcmp(data, "the QUICK brown", 15) == 0);

	/* A read-only private page is written anyway (as ptrace's POKE). */
	char *ro = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT_TRUE(ro != MAP_FAILED);
	EXPECT(pwrite(fd, "xyz", 3, (off_t)(uintptr_t)ro + 100), 3);
	EXPECT_TRUE(memcmp(ro + 100, "xyz", 3) == 0);
	/* Even a PROT_NONE one reads and writes. */
	EXPECT_OK(mprotect(ro, 4096, PROT_NONE));
	EXPECT(pread(fd, buf, 3, (off_t)(uintptr_t)ro + 100), 3);
	EXPECT_TRUE(memcmp(buf, "xyz", 3) == 0);

	/* An unmapped page: EIO at once, or a short transfer that stops at it. */
	EXPECT_OK(munmap(ro + 4096, 4096));
	EXPECT_ERR(pread(fd, buf, 8, (off_t)(uintptr_t)ro + 4096), EIO);
	EXPECT_ERR(pwrite(fd, "ab", 2, (off_t)(uintptr_t)ro + 4096), EIO);
	EXPECT(pread(fd, buf, 8, (off_t)(uintptr_t)ro + 4092), 4);
	EXPECT_ERR(pread(fd, buf, 8, 0), EIO);

	/* A shared mapping of a file opened read-only is not written. */
	int rfd = CHECK(open(FIX("file.txt"), O_RDONLY));
	char *sh = mmap(NULL, 4096, PROT_READ, MAP_SHARED, rfd, 0);
	EXPECT_TRUE(sh != MAP_FAILED);
	EXPECT_ERR(pwrite(fd, "zz", 2, (off_t)(uintptr_t)sh), EIO);
	EXPECT(pread(fd, buf, 5, (off_t)(uintptr_t)sh), 5);
	EXPECT_TRUE(memcmp(buf, sh, 5) == 0);

	/* Another process's memory, by its pid. */
	int p[2], q[2];
	EXPECT_OK(pipe(p));
	EXPECT_OK(pipe(q));
	pid_t child = fork();
	if (child == 0) {
		strcpy(data, "child's own");
		char c;
		write(p[1], "r", 1);
		read(q[0], &c, 1);
		_exit(0);
	}
	EXPECT(read(p[0], buf, 1), 1);
	snprintf(path, sizeof path, "/proc/%d/mem", child);
	int cfd = CHECK(open(path, O_RDONLY));
	EXPECT(pread(cfd, buf, 11, (off_t)(uintptr_t)data), 11);
	EXPECT_TRUE(memcmp(buf, "child's own", 11) == 0);
	EXPECT_ERR(pwrite(cfd, "x", 1, (off_t)(uintptr_t)data), EBADF);
	EXPECT(write(q[1], "g", 1), 1);
	int st;
	EXPECT_TRUE(waitpid(child, &st, 0) == child);
	EXPECT(st, 0);
	/* Its memory is gone with it: the open file reads nothing. */
	EXPECT(pread(cfd, buf, 11, (off_t)(uintptr_t)data), 0);
	close(cfd);
	EXPECT_ERR(open(path, O_RDONLY), ENOENT);
	return t_done();
}
