/* cachestat(2): the pages of a memfd that hold data (written, or stored
 * through a shared mapping; holes have none) by range, the empty cache
 * of pipes, sockets, devices and directories, and EBADF (O_PATH too),
 * EFAULT and EINVAL in Linux's order. */
#include "t.h"
#include <sys/eventfd.h>
#include <sys/socket.h>

#define PG 4096
#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif

struct range { uint64_t off, len; };
struct stats { uint64_t cache, dirty, writeback, evicted, recent; };

static struct stats s;

static long cs(int fd, uint64_t off, uint64_t len)
{
	struct range r = {off, len};
	memset(&s, 0xff, sizeof s);
	return syscall(SYS_cachestat, fd, &r, &s, 0);
}

static void show(const char *what)
{
	SHOW("%s: cache %llu dirty %llu writeback %llu evicted %llu recent %llu", what,
	     (unsigned long long)s.cache, (unsigned long long)s.dirty,
	     (unsigned long long)s.writeback, (unsigned long long)s.evicted,
	     (unsigned long long)s.recent);
}

int main(void)
{
	int fd = memfd_create("cs", 0);
	EXPECT(fd, 3);
	EXPECT(cs(fd, 0, 0), 0);
	show("empty memfd");
	static char buf[3 * PG];
	memset(buf, 1, sizeof buf);
	EXPECT(write(fd, buf, sizeof buf), 3 * PG);
	EXPECT(ftruncate(fd, 8 * PG), 0);
	EXPECT(cs(fd, 0, 0), 0);
	show("3 pages written of 8");
	EXPECT(cs(fd, PG, PG), 0);
	show("page 1");
	EXPECT(cs(fd, PG + 1, PG), 0);
	show("pages 1-2 by an unaligned range");
	EXPECT(cs(fd, 2 * PG, 100 * PG), 0);
	show("from page 2");
	EXPECT(cs(fd, 100 * PG, 0), 0);
	show("past the end");
	EXPECT(cs(fd, -1UL, -1UL), 0);
	show("wrapping range");
	EXPECT(cs(fd, 0, -1UL), 0);
	show("whole range");
	char *m = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	EXPECT_TRUE(m != MAP_FAILED);
	m[5 * PG] = 1;
	EXPECT(cs(fd, 0, 0), 0);
	show("and page 5 stored through a mapping");
	EXPECT(ftruncate(fd, PG), 0);
	EXPECT(cs(fd, 0, 0), 0);
	show("truncated to 1 page");

	/* Errors: the descriptor, the range, then the flags. */
	struct range r = {0, 0};
	EXPECT_ERR(syscall(SYS_cachestat, fd, &r, &s, 1), EINVAL);
	EXPECT_ERR(syscall(SYS_cachestat, fd, BADPTR, &s, 1), EFAULT);
	EXPECT_ERR(syscall(SYS_cachestat, fd, &r, BADPTR, 0), EFAULT);
	EXPECT_ERR(syscall(SYS_cachestat, 99, &r, &s, 1), EBADF);
	EXPECT_ERR(syscall(SYS_cachestat, -1, &r, &s, 0), EBADF);
	int op = open("/", O_PATH);
	EXPECT_ERR(syscall(SYS_cachestat, op, &r, &s, 0), EBADF);

	/* Files without a page cache of their own report none. */
	int p[2];
	EXPECT(pipe(p), 0);
	EXPECT(write(p[1], "abc", 3), 3);
	EXPECT(cs(p[0], 0, 0), 0);
	show("pipe");
	EXPECT(cs(p[1], 0, 0), 0);
	show("pipe, write end");
	int sk = socket(AF_UNIX, SOCK_STREAM, 0);
	EXPECT(cs(sk, 0, 0), 0);
	show("socket");
	int ev = eventfd(0, 0);
	EXPECT(cs(ev, 0, 0), 0);
	show("eventfd");
	int dn = open("/dev/null", O_RDWR);
	EXPECT(cs(dn, 0, 0), 0);
	show("/dev/null");
	int dir = open("/", O_RDONLY | O_DIRECTORY);
	EXPECT(cs(dir, 0, 0), 0);
	show("directory");
	/* A file of the root: its numbers are the host's cache's. */
	int ro = open(FIX("file.txt"), O_RDONLY);
	EXPECT_TRUE(ro >= 0);
	EXPECT(cs(ro, 0, 0), 0);
	return t_done();
}
