/* Extended attributes on files the guest makes: user.* and trusted.* (as
 * root), the size and flag rules, the path, l- and f- forms. */
#include "t.h"
#include <sys/xattr.h>

/* Prints the names of `path`'s attributes, sorted (file systems list them
 * in their own order). */
static void show_names(const char *path)
{
	char buf[512], *names[16];
	long n = llistxattr(path, buf, sizeof buf);
	int count = 0;
	for (char *p = buf; n > 0 && p < buf + n && count < 16; p += strlen(p) + 1)
		names[count++] = p;
	for (int i = 0; i < count; i++)
		for (int j = i + 1; j < count; j++)
			if (strcmp(names[i], names[j]) > 0) {
				char *t = names[i];
				names[i] = names[j];
				names[j] = t;
			}
	printf("names(%s):", strrchr(path, '/') + 1);
	for (int i = 0; i < count; i++)
		printf(" %s", names[i]);
	printf("\n");
}

int main(void)
{
	char d[] = "/tmp/xattr-XXXXXX", f[64], l[64], sub[64], v[64];
	if (!mkdtemp(d))
		return 99;
	snprintf(f, sizeof f, "%s/f", d);
	snprintf(l, sizeof l, "%s/l", d);
	snprintf(sub, sizeof sub, "%s/sub", d);
	int fd = open(f, O_RDWR | O_CREAT, 0644);
	EXPECT_TRUE(fd >= 0);
	EXPECT(symlink("f", l), 0);
	EXPECT(mkdir(sub, 0755), 0);

	EXPECT_ERR(getxattr(f, "user.a", v, sizeof v), ENODATA);
	EXPECT(setxattr(f, "user.a", "hello", 5, 0), 0);
	EXPECT(getxattr(f, "user.a", NULL, 0), 5);
	EXPECT_ERR(getxattr(f, "user.a", v, 2), ERANGE);
	memset(v, 0, sizeof v);
	EXPECT(getxattr(f, "user.a", v, sizeof v), 5);
	SHOW("value: %s", v);
	EXPECT_ERR(setxattr(f, "user.a", "x", 1, XATTR_CREATE), EEXIST);
	EXPECT_ERR(setxattr(f, "user.b", "x", 1, XATTR_REPLACE), ENODATA);
	EXPECT_ERR(setxattr(f, "user.a", "x", 1, XATTR_CREATE | XATTR_REPLACE), EEXIST);
	EXPECT_ERR(setxattr(f, "user.a", "x", 1, 4), EINVAL);
	EXPECT(setxattr(f, "user.a", "replaced", 8, XATTR_REPLACE), 0);
	EXPECT(setxattr(f, "user.empty", "", 0, 0), 0);
	EXPECT(getxattr(f, "user.empty", v, sizeof v), 0);
	EXPECT(listxattr(f, NULL, 0), 18);
	EXPECT_ERR(listxattr(f, v, 3), ERANGE);
	show_names(f);

	/* Names and sizes. */
	EXPECT_ERR(setxattr(f, "", "x", 1, 0), ERANGE);
	char longname[300] = "user.";
	memset(longname + 5, 'n', 260);
	EXPECT_ERR(setxattr(f, longname, "x", 1, 0), ERANGE);
	EXPECT_ERR(setxattr(f, "bogus.x", "x", 1, 0), EOPNOTSUPP);
	static char big[65537];
	EXPECT_ERR(setxattr(f, "user.big", big, sizeof big, 0), E2BIG);
	EXPECT(setxattr(f, "user.mid", big, 2000, 0), 0);
	EXPECT(getxattr(f, "user.mid", NULL, 0), 2000);
	EXPECT_ERR(getxattr(f, "user.a", BADPTR, 64), EFAULT);

	/* Through the symlink, and on it. */
	EXPECT(getxattr(l, "user.a", v, sizeof v), 8);
	EXPECT_ERR(lgetxattr(l, "user.a", v, sizeof v), ENODATA);
	EXPECT_ERR(lsetxattr(l, "user.a", "x", 1, 0), EPERM);
	EXPECT(llistxattr(l, v, sizeof v), 0);

	/* Descriptors, directories, removal. */
	EXPECT(fsetxattr(fd, "user.viafd", "1", 1, 0), 0);
	EXPECT(fgetxattr(fd, "user.viafd", v, sizeof v), 1);
	EXPECT(flistxattr(fd, NULL, 0), 38);
	EXPECT(fremovexattr(fd, "user.viafd"), 0);
	EXPECT_ERR(fremovexattr(fd, "user.viafd"), ENODATA);
	EXPECT(removexattr(f, "user.mid"), 0);
	EXPECT_ERR(removexattr(f, "user.nothing"), ENODATA);
	EXPECT(setxattr(sub, "user.dir", "d", 1, 0), 0);
	EXPECT(getxattr(sub, "user.dir", v, sizeof v), 1);
	int pfd = open(f, O_PATH);
	EXPECT_ERR(fgetxattr(pfd, "user.a", v, sizeof v), EBADF);
	close(pfd);

	/* trusted.* as root. */
	EXPECT(setxattr(f, "trusted.t", "x", 1, 0), 0);
	show_names(f);

	close(fd);
	unlink(l);
	unlink(f);
	rmdir(sub);
	rmdir(d);
	return t_done();
}
