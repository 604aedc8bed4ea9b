/* Private mappings of one file are copies of their own: a store through one
 * (by the program, by the kernel for read(2), by a child after fork) is
 * seen there only, MADV_DONTNEED brings the file's bytes back, and a futex
 * word in a page not yet written keeps working once the page is written.
 * (In the sandbox such mappings share the file's image until written.) */
#include "t.h"
#include <linux/futex.h>
#include <pthread.h>
#include <time.h>

static const long pg = 4096;

static unsigned char expect_big(long i)
{
	return (unsigned char)(i * 7 + i / 4096);
}

/* Whether `m` (mapping the file from offset 0) holds the file's bytes in
 * [from, to). */
static int is_file(const unsigned char *m, long from, long to)
{
	int ok = 1;
	for (long i = from; i < to; i++)
		ok &= m[i] == expect_big(i);
	return ok;
}

static unsigned *futex_word;
static unsigned futex_seen;

static void *waiter(void *arg)
{
	(void)arg;
	struct timespec ts = { 5, 0 };
	long r = syscall(SYS_futex, futex_word, FUTEX_WAIT_PRIVATE, futex_seen, &ts, NULL, 0);
	/* Woken (0), or the word had changed already (EAGAIN): not a timeout. */
	return (void *)(long)(r == 0 || errno == EAGAIN);
}

int main(void)
{
	long len = 3 * pg + 100;
	int fd = EXPECT(open(FIX("big.bin"), O_RDONLY), 3);
	unsigned char *a = EXPECT_MAP(mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0));
	unsigned char *b = EXPECT_MAP(mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0));
	EXPECT_TRUE(is_file(a, 0, len) && is_file(b, 0, len));

	/* Stores by the program. */
	a[10] = 0xa1;
	a[2 * pg + 5] = 0xa2;
	EXPECT_TRUE(a[10] == 0xa1 && a[2 * pg + 5] == 0xa2);
	EXPECT_TRUE(is_file(b, 0, len));
	EXPECT_TRUE(is_file(a, 11, 2 * pg + 5) && is_file(a, 2 * pg + 6, len));
	/* The tail past the file's end reads zeros and takes stores. */
	EXPECT(a[3 * pg + 200], 0);
	a[3 * pg + 200] = 9;
	EXPECT(a[3 * pg + 200], 9);
	EXPECT(b[3 * pg + 200], 0);

	/* A store by the kernel: read(2) into a page not written yet. */
	int fd2 = EXPECT(open(FIX("file.txt"), O_RDONLY), 4);
	EXPECT(read(fd2, b + pg + 1, 5), 5);
	EXPECT_TRUE(memcmp(b + pg + 1, "hello", 5) == 0);
	EXPECT_TRUE(is_file(a, pg, 2 * pg));
	EXPECT_TRUE(is_file(b, pg + 6, len));
	EXPECT(close(fd2), 0);

	/* fork: each side's later stores are its own. */
	int p[2];
	EXPECT(pipe(p), 0);
	pid_t c = fork();
	if (c == 0) {
		char go;
		b[3 * pg] = 0xc1; /* a page the parent has not written */
		if (read(p[0], &go, 1) != 1)
			_exit(10);
		/* The parent wrote b[0] after the fork: not seen here. */
		_exit(b[0] == expect_big(0) && b[3 * pg] == 0xc1 && a[10] == 0xa1 ? 0 : 11);
	}
	b[0] = 0xb0;
	EXPECT(write(p[1], "x", 1), 1);
	int st;
	EXPECT_TRUE(waitpid(c, &st, 0) == c);
	EXPECT_TRUE(WIFEXITED(st));
	EXPECT(WEXITSTATUS(st), 0);
	EXPECT(b[3 * pg], expect_big(3 * pg));
	EXPECT(b[0], 0xb0);

	/* MADV_DONTNEED: the file's bytes again, written pages or not. */
	EXPECT(madvise(a, len, MADV_DONTNEED), 0);
	EXPECT_TRUE(is_file(a, 0, len));
	EXPECT(a[3 * pg + 200], 0);
	EXPECT(b[0], 0xb0);

	/* mprotect: read-only, then writable again. */
	EXPECT(mprotect(a, len, PROT_READ), 0);
	EXPECT_TRUE(is_file(a, 0, len));
	EXPECT(mprotect(a, len, PROT_READ | PROT_WRITE), 0);
	a[pg] = 0x77;
	EXPECT(a[pg], 0x77);
	EXPECT_TRUE(is_file(a, pg + 1, len) && is_file(b, pg + 6, 3 * pg));

	/* mremap moves the mapping's bytes, written ones included. */
	unsigned char *r = EXPECT_MAP(mremap(a, 4 * pg, 8 * pg, MREMAP_MAYMOVE));
	EXPECT(r[pg], 0x77);
	EXPECT_TRUE(is_file(r, 0, pg) && is_file(r, pg + 1, 3 * pg + 100));
	EXPECT(munmap(r, 8 * pg), 0);

	/* A futex word in a page nobody has written yet. */
	unsigned char *f = EXPECT_MAP(mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0));
	futex_word = (unsigned *)(f + pg + 64);
	futex_seen = *futex_word;
	pthread_t t;
	EXPECT(pthread_create(&t, NULL, waiter, NULL), 0);
	struct timespec pause = { 0, 100 * 1000 * 1000 };
	nanosleep(&pause, NULL);
	*futex_word = futex_seen + 1;
	syscall(SYS_futex, futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	void *woken;
	EXPECT(pthread_join(t, &woken), 0);
	EXPECT((long)woken, 1);
	EXPECT(munmap(f, 2 * pg), 0);

	EXPECT(munmap(b, len), 0);
	EXPECT(close(fd), 0);
	return t_done();
}
