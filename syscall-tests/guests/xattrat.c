/* setxattrat, getxattrat, listxattrat, removexattrat (Linux 6.13): the
 * *at forms of the xattr calls, by path from a directory descriptor or on
 * a descriptor itself (AT_EMPTY_PATH), with struct xattr_args; their
 * flag and size errors. */
#include "t.h"

#ifndef SYS_setxattrat
#define SYS_setxattrat 463
#define SYS_getxattrat 464
#define SYS_listxattrat 465
#define SYS_removexattrat 466
#endif

struct xargs {
	unsigned long long value;
	unsigned size, flags;
};

int main(void)
{
	char dir[] = "/tmp/xattrat.XXXXXX";
	if (!mkdtemp(dir))
		return 125;
	int d = open(dir, O_RDONLY | O_DIRECTORY);
	int f = openat(d, "f", O_RDWR | O_CREAT, 0644);
	EXPECT_TRUE(d >= 0 && f >= 0);
	struct xargs x = { .value = (unsigned long long)(uintptr_t)"hello", .size = 5 };
	EXPECT(syscall(SYS_setxattrat, d, "f", 0, "user.a", &x, sizeof x), 0);
	x.flags = 1; /* XATTR_CREATE: it exists */
	EXPECT_ERR(syscall(SYS_setxattrat, d, "f", 0, "user.a", &x, sizeof x), EEXIST);
	x.flags = 0;
	x.value = (unsigned long long)(uintptr_t)"on fd";
	EXPECT(syscall(SYS_setxattrat, f, "", AT_EMPTY_PATH, "user.b", &x, sizeof x), 0);
	char buf[64] = { 0 };
	struct xargs g = { .value = (unsigned long long)(uintptr_t)buf, .size = sizeof buf };
	EXPECT(syscall(SYS_getxattrat, d, "f", 0, "user.a", &g, sizeof g), 5);
	SHOW("user.a = %s", buf);
	memset(buf, 0, sizeof buf);
	EXPECT(syscall(SYS_getxattrat, f, "", AT_EMPTY_PATH, "user.b", &g, sizeof g), 5);
	SHOW("user.b = %s", buf);
	/* Size 0 asks for the length. */
	g.size = 0;
	EXPECT(syscall(SYS_getxattrat, d, "f", 0, "user.a", &g, sizeof g), 5);
	g.size = sizeof buf;
	char list[128];
	long n = syscall(SYS_listxattrat, d, "f", 0, list, sizeof list);
	int a = 0, b = 0;
	for (long i = 0; i < n; i += strlen(list + i) + 1) {
		a |= strcmp(list + i, "user.a") == 0;
		b |= strcmp(list + i, "user.b") == 0;
	}
	EXPECT_TRUE(a && b);
	EXPECT(syscall(SYS_removexattrat, d, "f", 0, "user.a"), 0);
	EXPECT_ERR(syscall(SYS_getxattrat, d, "f", 0, "user.a", &g, sizeof g), ENODATA);
	EXPECT(syscall(SYS_removexattrat, f, "", AT_EMPTY_PATH, "user.b"), 0);

	/* Errors. */
	EXPECT_ERR(syscall(SYS_setxattrat, d, "f", 0x2, "user.a", &x, sizeof x), EINVAL);
	EXPECT_ERR(syscall(SYS_listxattrat, d, "f", 0x2, list, sizeof list), EINVAL);
	EXPECT_ERR(syscall(SYS_setxattrat, d, "f", 0, "user.a", &x, 8), EINVAL);
	EXPECT_ERR(syscall(SYS_setxattrat, d, "f", 0, "user.a", &x, 8192), E2BIG);
	struct { struct xargs x; unsigned long long more; } big = { x, 1 };
	EXPECT_ERR(syscall(SYS_setxattrat, d, "f", 0, "user.a", &big, sizeof big), E2BIG);
	big.more = 0;
	EXPECT(syscall(SYS_setxattrat, d, "f", 0, "user.c", &big, sizeof big), 0);
	g.flags = 1;
	EXPECT_ERR(syscall(SYS_getxattrat, d, "f", 0, "user.c", &g, sizeof g), EINVAL);
	g.flags = 0;
	EXPECT_ERR(syscall(SYS_getxattrat, d, "", 0, "user.c", &g, sizeof g), ENOENT);
	EXPECT_ERR(syscall(SYS_getxattrat, d, "missing", 0, "user.c", &g, sizeof g), ENOENT);
	close(f);
	unlinkat(d, "f", 0);
	close(d);
	rmdir(dir);
	return t_done();
}
