/* open_tree_attr(2) (Linux 6.15; natively this guest needs a kernel that
 * has it) as an unprivileged process: a null mount_attr with a size is
 * EINVAL; then open_tree's own checks (flags, the OPEN_TREE_CLONE
 * privilege, the path); without attributes it is open_tree; with them the
 * size is checked as mount_setattr checks it, then the privilege refuses,
 * before the attributes are even read. The sandbox answers as Linux
 * answers a process without CAP_SYS_ADMIN (see privileged_refused.c). */
#include "t.h"
#include <grp.h>

#ifndef SYS_open_tree_attr
#define SYS_open_tree_attr 467
#endif
#define OPEN_TREE_CLONE_ 1
#define AT_RECURSIVE_ 0x8000

struct mount_attr_ {
	unsigned long long attr_set, attr_clr, propagation, userns_fd;
};

static long ota(const char *path, unsigned flags, void *attr, size_t size)
{
	return syscall(SYS_open_tree_attr, AT_FDCWD, path, flags, attr, size);
}

int main(void)
{
	EXPECT(setgroups(0, NULL), 0);
	EXPECT(setresgid(65534, 65534, 65534), 0);
	EXPECT(setresuid(65534, 65534, 65534), 0);

	struct mount_attr_ none = { 0 };
	struct mount_attr_ ro = { .attr_set = 1 /* MOUNT_ATTR_RDONLY */ };
	struct mount_attr_ unknown = { .attr_set = 0x40000000 };
	unsigned char longer[64] = { 0 }, longer_set[64] = { 0 };
	longer_set[40] = 1;

	/* Arguments first. */
	EXPECT_ERR(ota(FIX("dir"), 0, NULL, 8), EINVAL);
	EXPECT_ERR(ota(FIX("dir"), 0x40000000, &none, sizeof none), EINVAL);
	EXPECT_ERR(ota(FIX("dir"), AT_RECURSIVE_, &none, sizeof none), EINVAL);
	EXPECT_ERR(ota(FIX("nope"), 0x40000000, &none, 8), EINVAL);
	/* A clone of the tree needs the privilege, before the path. */
	EXPECT_ERR(ota(FIX("nope"), OPEN_TREE_CLONE_, &ro, sizeof ro), EPERM);
	EXPECT_ERR(ota("/", OPEN_TREE_CLONE_ | AT_RECURSIVE_, NULL, 0), EPERM);
	/* Then the path, before the attributes' size. */
	EXPECT_ERR(ota(FIX("nope"), 0, &ro, sizeof ro), ENOENT);
	EXPECT_ERR(ota(FIX("nope"), 0, &none, 8), ENOENT);
	EXPECT_ERR(ota(FIX("nope"), 0, &none, 8192), ENOENT);
	/* Without attributes: open_tree, an O_PATH descriptor. */
	int fd = EXPECT(ota(FIX("dir"), O_CLOEXEC, NULL, 0), 3);
	EXPECT(fcntl(fd, F_GETFL) & (O_PATH | O_ACCMODE), O_PATH);
	EXPECT(fcntl(fd, F_GETFD), FD_CLOEXEC);
	EXPECT(faccessat(fd, "a", R_OK, 0), 0);
	EXPECT(close(fd), 0);
	/* With attributes: the size, then the privilege (even for none, an
	 * unknown one, or a pointer that cannot be read). */
	EXPECT_ERR(ota(FIX("dir"), 0, &none, 8), EINVAL);
	EXPECT_ERR(ota(FIX("dir"), 0, &none, 8192), E2BIG);
	EXPECT_ERR(ota(FIX("dir"), 0, &none, sizeof none), EPERM);
	EXPECT_ERR(ota(FIX("dir"), 0, &ro, sizeof ro), EPERM);
	EXPECT_ERR(ota("/", 0, &ro, sizeof ro), EPERM);
	EXPECT_ERR(ota(FIX("dir"), 0, &unknown, sizeof unknown), EPERM);
	EXPECT_ERR(ota(FIX("dir"), 0, longer, sizeof longer), EPERM);
	EXPECT_ERR(ota(FIX("dir"), 0, longer_set, sizeof longer_set), EPERM);
	EXPECT_ERR(ota(FIX("dir"), 0, BADPTR, sizeof ro), EPERM);
	/* No descriptor was left behind by the refused calls. */
	EXPECT(dup(0), 3);
	return t_done();
}
