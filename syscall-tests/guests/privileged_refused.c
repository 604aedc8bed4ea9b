/* The calls that would change or step around the file system view (mount,
 * umount2, pivot_root, chroot, the new mount API, file handles) as an
 * unprivileged process: after dropping to nobody, Linux refuses each one,
 * and so does the sandbox (which refuses all but chroot to its root as
 * well, see runsc-shim/tests/real_programs.rs; chroot.c covers chroot as
 * root). Argument errors Linux reports before the privilege check (unknown
 * flags, a missing path) come first in both. */
#include "t.h"
#include <grp.h>
#include <sys/mount.h>

#ifndef SYS_open_tree
#define SYS_open_tree 428
#define SYS_move_mount 429
#define SYS_fsopen 430
#define SYS_fsconfig 431
#define SYS_fsmount 432
#define SYS_fspick 433
#define SYS_mount_setattr 442
#endif
#define OPEN_TREE_CLONE_ 1
#define AT_RECURSIVE_ 0x8000
#define FSCONFIG_SET_FLAG_ 0
#define FSCONFIG_SET_STRING_ 1
#define FSCONFIG_CMD_CREATE_ 6

struct mount_attr_ {
	unsigned long long attr_set, attr_clr, propagation, userns_fd;
};

struct handle {
	unsigned int bytes;
	int type;
	unsigned char f_handle[64];
};

int main(void)
{
	EXPECT(setgroups(0, NULL), 0);
	EXPECT(setresgid(65534, 65534, 65534), 0);
	EXPECT(setresuid(65534, 65534, 65534), 0);

	/* mount(2): tmpfs, proc, a bind of / over a directory. */
	EXPECT_ERR(mount("none", FIX("dir"), "tmpfs", 0, NULL), EPERM);
	EXPECT_ERR(mount("proc", FIX("dir"), "proc", 0, NULL), EPERM);
	EXPECT_ERR(mount("/", FIX("dir"), NULL, MS_BIND | MS_REC, NULL), EPERM);
	EXPECT_ERR(mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND, NULL), EPERM);

	/* umount2(2): bad flags first, then privilege. */
	EXPECT_ERR(umount2("/proc", 0x100), EINVAL);
	EXPECT_ERR(umount2("/proc", MNT_DETACH), EPERM);
	EXPECT_ERR(umount2("/", 0), EPERM);

	/* pivot_root(2) */
	EXPECT_ERR(syscall(SYS_pivot_root, ".", "."), EPERM);
	EXPECT_ERR(syscall(SYS_pivot_root, "/", FIX("dir")), EPERM);

	/* chroot(2): the path is checked, then the capability. */
	EXPECT_ERR(chroot(FIX("does-not-exist-at-all")), ENOENT);
	EXPECT_ERR(chroot(FIX("file.txt")), ENOTDIR);
	EXPECT_ERR(chroot(FIX("dir")), EPERM);
	EXPECT_ERR(chroot("/"), EPERM);

	/* The new mount API. fsopen, fspick, fsmount and move_mount check the
	 * privilege before anything else. */
	EXPECT_ERR(syscall(SYS_fsopen, "tmpfs", 0), EPERM);
	EXPECT_ERR(syscall(SYS_fsopen, "no-such-fs", 0x100), EPERM);
	EXPECT_ERR(syscall(SYS_fspick, AT_FDCWD, "/", 0), EPERM);
	EXPECT_ERR(syscall(SYS_fspick, AT_FDCWD, FIX("nope"), 0x100), EPERM);
	EXPECT_ERR(syscall(SYS_fsmount, -1, 0, 0), EPERM);
	EXPECT_ERR(syscall(SYS_fsmount, 999, 0xff, 0), EPERM);
	EXPECT_ERR(syscall(SYS_move_mount, AT_FDCWD, "/proc", AT_FDCWD,
			   FIX("dir"), 0), EPERM);
	EXPECT_ERR(syscall(SYS_move_mount, -1, "", -1, "", 0x1000), EPERM);

	/* mount_setattr(2): flags, then the size of struct mount_attr, then
	 * the privilege. */
	struct mount_attr_ attr = { .attr_set = 1 /* MOUNT_ATTR_RDONLY */ };
	EXPECT_ERR(syscall(SYS_mount_setattr, AT_FDCWD, "/", 0x1, &attr,
			   sizeof attr), EINVAL);
	EXPECT_ERR(syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, &attr, 8192),
		   E2BIG);
	EXPECT_ERR(syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, &attr, 8),
		   EINVAL);
	EXPECT_ERR(syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, &attr,
			   sizeof attr), EPERM);
	EXPECT_ERR(syscall(SYS_mount_setattr, AT_FDCWD, FIX("dir"),
			   AT_RECURSIVE_, &attr, sizeof attr), EPERM);

	/* fsconfig(2) needs a file system context, which nobody here can get:
	 * its own argument checks, then EBADF, then EINVAL for any other
	 * descriptor. */
	int any = open("/", O_RDONLY | O_DIRECTORY);
	EXPECT_TRUE(any >= 0);
	EXPECT_ERR(syscall(SYS_fsconfig, -1, FSCONFIG_SET_FLAG_, "ro", NULL, 0),
		   EINVAL);
	EXPECT_ERR(syscall(SYS_fsconfig, 999, 99, NULL, NULL, 0), EOPNOTSUPP);
	EXPECT_ERR(syscall(SYS_fsconfig, 999, FSCONFIG_SET_STRING_, "k", NULL, 0),
		   EINVAL);
	EXPECT_ERR(syscall(SYS_fsconfig, 999, FSCONFIG_SET_FLAG_, "ro", NULL, 0),
		   EBADF);
	EXPECT_ERR(syscall(SYS_fsconfig, any, FSCONFIG_SET_FLAG_, "ro", NULL, 0),
		   EINVAL);
	EXPECT_ERR(syscall(SYS_fsconfig, any, FSCONFIG_CMD_CREATE_, NULL, NULL,
			   0), EINVAL);
	EXPECT(close(any), 0);

	/* open_tree(2): a detached clone of the tree needs the privilege (after
	 * the flags, before the path); without OPEN_TREE_CLONE it is an O_PATH
	 * open anyone may make. */
	EXPECT_ERR(syscall(SYS_open_tree, AT_FDCWD, "/", 0x40000000), EINVAL);
	EXPECT_ERR(syscall(SYS_open_tree, AT_FDCWD, "/", AT_RECURSIVE_), EINVAL);
	EXPECT_ERR(syscall(SYS_open_tree, AT_FDCWD, FIX("nope"),
			   OPEN_TREE_CLONE_), EPERM);
	EXPECT_ERR(syscall(SYS_open_tree, AT_FDCWD, "/",
			   OPEN_TREE_CLONE_ | AT_RECURSIVE_), EPERM);
	EXPECT_ERR(syscall(SYS_open_tree, AT_FDCWD, FIX("nope"), 0), ENOENT);
	int tree = EXPECT(syscall(SYS_open_tree, AT_FDCWD, FIX("dir"),
				  O_CLOEXEC), 3);
	EXPECT(fcntl(tree, F_GETFL) & (O_PATH | O_ACCMODE), O_PATH);
	EXPECT(fcntl(tree, F_GETFD), FD_CLOEXEC);
	EXPECT(faccessat(tree, "a", R_OK, 0), 0);
	int again = EXPECT(syscall(SYS_open_tree, tree, "", AT_EMPTY_PATH), 4);
	EXPECT(fcntl(again, F_GETFD), 0);
	EXPECT(faccessat(again, "a", R_OK, 0), 0);
	EXPECT_ERR(syscall(SYS_open_tree, tree, "", 0), ENOENT);
	EXPECT(close(again), 0);
	EXPECT(close(tree), 0);

	/* name_to_handle_at(2): unknown flags, a missing path, and /proc
	 * (which exports no handles). */
	struct handle h = { .bytes = sizeof h.f_handle };
	int mount_id = -1;
	EXPECT_ERR(syscall(SYS_name_to_handle_at, AT_FDCWD, FIX("file.txt"), &h,
			   &mount_id, 0x8000), EINVAL);
	EXPECT_ERR(syscall(SYS_name_to_handle_at, AT_FDCWD, FIX("nope"), &h,
			   &mount_id, 0), ENOENT);
	EXPECT_ERR(syscall(SYS_name_to_handle_at, AT_FDCWD, "/proc/self/status",
			   &h, &mount_id, 0), EOPNOTSUPP);

	/* open_by_handle_at(2): a made-up handle (what "shocker" brute-forced)
	 * is refused before it is looked at. */
	struct handle forged = { .bytes = 8, .type = 1 };
	forged.f_handle[0] = 2; /* inode 2: the root directory of ext4 */
	int root = open("/", O_RDONLY | O_DIRECTORY);
	EXPECT_TRUE(root >= 0);
	EXPECT_ERR(syscall(SYS_open_by_handle_at, 999, &forged, O_RDONLY), EBADF);
	EXPECT_ERR(syscall(SYS_open_by_handle_at, root, &forged, O_RDONLY), EPERM);
	EXPECT_ERR(syscall(SYS_open_by_handle_at, AT_FDCWD, &forged,
			   O_RDONLY | O_DIRECTORY), EPERM);

	/* Nothing above changed the view: the fixtures are where they were. */
	char buf[64];
	EXPECT(t_slurp(FIX("file.txt"), buf, sizeof buf), 14);
	EXPECT(access(FIX("dir/a"), R_OK), 0);
	return t_done();
}
