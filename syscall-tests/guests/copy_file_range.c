/* copy_file_range(2) between files of one directory in /tmp: with offset
 * pointers (stored back, positions untouched) and without (positions used
 * and advanced), stopping at the end of the input, over 2 MiB copied the
 * way cp does (until 0) with checksums, ranges of one file that do not
 * overlap; and the errors: EINVAL (flags, not regular files, overlap,
 * negative offset), EISDIR, EBADF (bad descriptors, write-only input,
 * read-only or appending output), EOVERFLOW, EFAULT. */
#include "t.h"

#define BIG ((2L << 20) + 12345)

static unsigned long long sum(const unsigned char *p, long n)
{
	unsigned long long h = 1469598103934665603ULL;
	for (long i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

int main(void)
{
	char dir[] = "/tmp/cfrXXXXXX", a[64], b[64], c[64];
	if (!mkdtemp(dir))
		return 99;
	unsigned char *src = malloc(BIG), *got = malloc(BIG + 1);
	for (long i = 0; i < BIG; i++)
		src[i] = (unsigned char)(i * 13 + (i >> 11));
	snprintf(a, sizeof a, "%s/a", dir);
	snprintf(b, sizeof b, "%s/b", dir);
	snprintf(c, sizeof c, "%s/c", dir);
	int in = open(a, O_RDWR | O_CREAT | O_TRUNC, 0600);
	EXPECT(write(in, src, BIG), BIG);
	EXPECT(lseek(in, 0, SEEK_SET), 0);
	int out = open(b, O_RDWR | O_CREAT | O_TRUNC, 0600);

	/* The way cp copies: until 0, positions advancing. */
	long total = 0, r;
	while ((r = copy_file_range(in, NULL, out, NULL, 1 << 30, 0)) > 0)
		total += r;
	EXPECT(r, 0);
	EXPECT(total, BIG);
	EXPECT(lseek(in, 0, SEEK_CUR), BIG);
	EXPECT(lseek(out, 0, SEEK_CUR), BIG);
	EXPECT(pread(out, got, BIG + 1, 0), BIG);
	EXPECT_TRUE(sum(got, BIG) == sum(src, BIG));

	/* Offset pointers: stored back, positions untouched. */
	loff_t oi = 100, oo = 50;
	EXPECT(copy_file_range(in, &oi, out, &oo, 1000, 0), 1000);
	EXPECT(oi, 1100);
	EXPECT(oo, 1050);
	EXPECT(lseek(in, 0, SEEK_CUR), BIG);
	EXPECT(lseek(out, 0, SEEK_CUR), BIG);
	EXPECT(pread(out, got, 1000, 50), 1000);
	EXPECT_TRUE(memcmp(got, src + 100, 1000) == 0);
	/* One offset given, the other from the position. */
	EXPECT(lseek(in, 7, SEEK_SET), 7);
	oo = 0;
	EXPECT(copy_file_range(in, NULL, out, &oo, 10, 0), 10);
	EXPECT(lseek(in, 0, SEEK_CUR), 17);
	EXPECT(oo, 10);
	/* The end of the input cuts the copy; beyond it nothing is copied. */
	oi = BIG - 5;
	oo = 0;
	EXPECT(copy_file_range(in, &oi, out, &oo, 100, 0), 5);
	EXPECT(oi, BIG);
	EXPECT(copy_file_range(in, &oi, out, &oo, 100, 0), 0);
	oi = BIG + 100;
	EXPECT(copy_file_range(in, &oi, out, &oo, 100, 0), 0);
	EXPECT(oi, BIG + 100);
	EXPECT(copy_file_range(in, &oi, out, &oo, 0, 0), 0);
	/* Growing a file past its end. */
	int small = open(c, O_RDWR | O_CREAT | O_TRUNC, 0600);
	oi = 0;
	oo = 4096;
	EXPECT(copy_file_range(in, &oi, small, &oo, 10, 0), 10);
	struct stat stt;
	EXPECT(fstat(small, &stt), 0);
	EXPECT(stt.st_size, 4106);
	/* Within one file: apart is fine, overlapping is not. */
	oi = 0;
	oo = 100;
	EXPECT(copy_file_range(small, &oi, small, &oo, 50, 0), 50);
	oi = 4096;
	oo = 5000;
	EXPECT(copy_file_range(small, &oi, small, &oo, 10, 0), 10);
	EXPECT(pread(small, got, 10, 5000), 10);
	EXPECT_TRUE(memcmp(got, src, 10) == 0);
	oi = 4096;
	oo = 4100;
	EXPECT_ERR(copy_file_range(small, &oi, small, &oo, 10, 0), EINVAL);

	/* Errors. */
	int p[2];
	EXPECT(pipe(p), 0);
	int d = open(dir, O_RDONLY | O_DIRECTORY);
	int ro = open(c, O_RDONLY), wo = open(c, O_WRONLY), app = open(b, O_WRONLY | O_APPEND);
	int z = open("/dev/zero", O_RDONLY);
	oi = 0;
	oo = 0;
	EXPECT_ERR(copy_file_range(in, &oi, out, &oo, 10, 1), EINVAL);
	EXPECT_ERR(copy_file_range(99, &oi, out, &oo, 10, 0), EBADF);
	EXPECT_ERR(copy_file_range(in, &oi, 99, &oo, 10, 0), EBADF);
	EXPECT_ERR(copy_file_range(in, BADPTR, out, &oo, 10, 0), EFAULT);
	EXPECT_ERR(copy_file_range(in, &oi, out, BADPTR, 10, 1), EFAULT);
	EXPECT_ERR(copy_file_range(d, NULL, out, NULL, 10, 0), EISDIR);
	EXPECT_ERR(copy_file_range(in, NULL, d, NULL, 10, 0), EISDIR);
	EXPECT_ERR(copy_file_range(p[0], NULL, out, NULL, 10, 0), EINVAL);
	EXPECT_ERR(copy_file_range(in, NULL, p[1], NULL, 10, 0), EINVAL);
	EXPECT_ERR(copy_file_range(z, NULL, out, NULL, 10, 0), EINVAL);
	EXPECT_ERR(copy_file_range(in, &oi, ro, &oo, 10, 0), EBADF);
	EXPECT_ERR(copy_file_range(wo, &oi, out, &oo, 10, 0), EBADF);
	EXPECT_ERR(copy_file_range(in, &oi, app, &oo, 10, 0), EBADF);
	EXPECT_ERR(copy_file_range(in, &oi, app, &oo, 0, 0), EBADF);
	oi = -1;
	EXPECT_ERR(copy_file_range(in, &oi, out, &oo, 10, 0), EOVERFLOW);
	oi = 0;
	oo = 100;
	EXPECT_ERR(copy_file_range(in, &oi, out, &oo, -1, 0), EOVERFLOW);
	oi = -100;
	EXPECT_ERR(copy_file_range(in, &oi, out, &oo, 10, 0), EINVAL);
	oi = 0;
	oo = -100;
	EXPECT_ERR(copy_file_range(in, &oi, out, &oo, 10, 0), EINVAL);

	unlink(a);
	unlink(b);
	unlink(c);
	rmdir(dir);
	return t_done();
}
