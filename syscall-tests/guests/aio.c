/* Linux AIO through the raw calls: the ring io_setup maps (its header as
 * Linux lays it out), reads, writes, vectored I/O and fsync completed in
 * the ring and reaped by io_getevents, the eventfd of IOCB_FLAG_RESFD,
 * timeouts, and the errnos of each call in Linux's order (EINVAL, EBADF,
 * EFAULT, a partial submit); a forked child has no contexts. */
#include "t.h"
#include <linux/aio_abi.h>
#include <sys/eventfd.h>
#include <sys/wait.h>

static long setup(unsigned n, aio_context_t *c) { return syscall(SYS_io_setup, n, c); }
static long submit(aio_context_t c, long n, struct iocb **l) { return syscall(SYS_io_submit, c, n, l); }
static long getev(aio_context_t c, long min, long n, struct io_event *e, struct timespec *t)
{
	return syscall(SYS_io_getevents, c, min, n, e, t);
}

struct ring { unsigned id, nr, head, tail, magic, compat, incompat, header; };

static struct iocb cb(int op, int fd, void *buf, size_t n, long off, unsigned long data)
{
	struct iocb c;
	memset(&c, 0, sizeof c);
	c.aio_lio_opcode = op;
	c.aio_fildes = fd;
	c.aio_buf = (unsigned long)buf;
	c.aio_nbytes = n;
	c.aio_offset = off;
	c.aio_data = data;
	c.aio_key = 77; /* Linux writes its key, 0, back */
	return c;
}

static long aio_nr(void)
{
	char b[32] = {0};
	int fd = open("/proc/sys/fs/aio-nr", O_RDONLY);
	if (fd < 0 || read(fd, b, sizeof b - 1) <= 0)
		return -1;
	close(fd);
	return atol(b);
}

int main(void)
{
	aio_context_t ctx = 0, bad = 5;
	long nr0 = aio_nr();
	EXPECT_ERR(setup(0, &ctx), EINVAL);
	EXPECT_ERR(setup(4, &bad), EINVAL);
	EXPECT_ERR(setup(4, BADPTR), EFAULT);
	EXPECT(setup(4, &ctx), 0);
	EXPECT_TRUE(ctx != 0);
	SHOW("aio-nr grew by %ld", aio_nr() - nr0);
	struct ring *r = (struct ring *)ctx;
	SHOW("ring: magic %#x head %u tail %u compat %u incompat %u header %u nr>8 %d",
	     r->magic, r->head, r->tail, r->compat, r->incompat, r->header, r->nr > 8);

	int fd = open("/tmp", O_TMPFILE | O_RDWR, 0600);
	EXPECT_TRUE(fd >= 0);
	EXPECT(write(fd, "hello world", 11), 11);
	char got[8] = {0};
	struct iocb a = cb(IOCB_CMD_PREAD, fd, got, 5, 6, 1);
	struct iocb b = cb(IOCB_CMD_PWRITE, fd, "HELLO", 5, 0, 2);
	struct iocb s = cb(IOCB_CMD_FSYNC, fd, NULL, 0, 0, 3);
	struct iocb *list[] = {&a, &b, &s};
	EXPECT(submit(ctx, 3, list), 3);
	SHOW("key written back: %u", a.aio_key);
	struct io_event ev[8];
	EXPECT(getev(ctx, 3, 8, ev, NULL), 3);
	for (int i = 0; i < 3; i++)
		SHOW("event %d: data %llu obj-is-iocb %d res %lld res2 %lld", i,
		     (unsigned long long)ev[i].data, ev[i].obj == (unsigned long)list[i],
		     (long long)ev[i].res, (long long)ev[i].res2);
	SHOW("read: %s", got);
	SHOW("ring after reaping: head %u tail %u", r->head, r->tail);
	char all[12] = {0};
	EXPECT(pread(fd, all, 11, 0), 11);
	SHOW("file: %s", all);

	/* Vectored, and the eventfd told of the completion. */
	int efd = eventfd(0, 0);
	char p1[3] = {0}, p2[4] = {0};
	struct iovec iov[2] = {{p1, 2}, {p2, 3}};
	struct iocb v = cb(IOCB_CMD_PREADV, fd, iov, 2, 1, 9);
	v.aio_flags = IOCB_FLAG_RESFD;
	v.aio_resfd = efd;
	struct iocb *vl[] = {&v};
	EXPECT(submit(ctx, 1, vl), 1);
	uint64_t n = 0;
	EXPECT(read(efd, &n, 8), 8);
	SHOW("eventfd: %llu", (unsigned long long)n);
	EXPECT(getev(ctx, 1, 1, ev, NULL), 1);
	SHOW("preadv: res %lld %s|%s", (long long)ev[0].res, p1, p2);

	/* What the request met is its result; what the call refuses is its
	 * error, or ends a batch after the first. */
	int ro = open("/tmp", O_TMPFILE | O_RDWR, 0600);
	struct iocb w = cb(IOCB_CMD_PWRITE, ro, BADPTR, 4, 0, 4);
	struct iocb *wl[] = {&w};
	EXPECT(submit(ctx, 1, wl), 1);
	EXPECT(getev(ctx, 1, 1, ev, NULL), 1);
	SHOW("write from a bad buffer: res %lld", (long long)ev[0].res);
	struct iocb badfd = cb(IOCB_CMD_PREAD, 999, got, 1, 0, 5);
	struct iocb *bl[] = {&badfd};
	EXPECT_ERR(submit(ctx, 1, bl), EBADF);
	struct iocb *mixed[] = {&a, &badfd};
	EXPECT(submit(ctx, 2, mixed), 1);
	EXPECT(getev(ctx, 1, 8, ev, NULL), 1);
	int wo = open("/dev/null", O_WRONLY);
	struct iocb rd = cb(IOCB_CMD_PREAD, wo, got, 1, 0, 6);
	struct iocb *rl[] = {&rd};
	EXPECT_ERR(submit(ctx, 1, rl), EBADF);
	struct iocb op = cb(99, fd, got, 1, 0, 7);
	struct iocb *ol[] = {&op};
	EXPECT_ERR(submit(ctx, 1, ol), EINVAL);
	struct iocb res2 = cb(IOCB_CMD_PREAD, fd, got, 1, 0, 8);
	res2.aio_reserved2 = 1;
	struct iocb *r2[] = {&res2};
	EXPECT_ERR(submit(ctx, 1, r2), EINVAL);
	int pfd[2];
	EXPECT(pipe(pfd), 0);
	struct iocb ps = cb(IOCB_CMD_FSYNC, pfd[0], NULL, 0, 0, 9);
	struct iocb *pl[] = {&ps};
	EXPECT_ERR(submit(ctx, 1, pl), EINVAL);
	int dir = open("/tmp", O_RDONLY | O_DIRECTORY);
	struct iocb dr = cb(IOCB_CMD_PREAD, dir, got, 1, 0, 10);
	struct iocb *dl[] = {&dr};
	EXPECT_ERR(submit(ctx, 1, dl), EINVAL);
	EXPECT_ERR(submit(ctx, -1, list), EINVAL);
	EXPECT(submit(ctx, 0, list), 0);
	EXPECT_ERR(submit(ctx, 1, BADPTR), EFAULT);
	EXPECT_ERR(submit(12345, 1, list), EINVAL);

	/* io_getevents: argument checks, a timeout with nothing to reap. */
	EXPECT_ERR(getev(ctx, 2, 1, ev, NULL), EINVAL);
	EXPECT_ERR(getev(ctx, -1, 1, ev, NULL), EINVAL);
	EXPECT_ERR(getev(999, 0, 1, ev, NULL), EINVAL);
	struct timespec t = {0, 20 * 1000 * 1000};
	EXPECT(getev(ctx, 1, 1, ev, &t), 0);
	EXPECT(syscall(SYS_io_pgetevents, ctx, 0, 1, ev, NULL, NULL), 0);
	EXPECT_ERR(syscall(SYS_io_cancel, ctx, &a, ev), EINVAL);

	/* A child has no contexts of its own. */
	pid_t c = fork();
	if (c == 0)
		_exit(getev(ctx, 0, 1, ev, NULL) == -1 && errno == EINVAL ? 0 : 1);
	int st;
	EXPECT_TRUE(waitpid(c, &st, 0) == c);
	SHOW("child: %d", WEXITSTATUS(st));

	EXPECT(syscall(SYS_io_destroy, ctx), 0);
	SHOW("aio-nr back by %ld", aio_nr() - nr0);
	EXPECT_ERR(syscall(SYS_io_destroy, ctx), EINVAL);
	EXPECT_ERR(getev(ctx, 0, 1, ev, NULL), EINVAL);
	return 0;
}
