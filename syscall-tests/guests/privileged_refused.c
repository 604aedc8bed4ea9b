/* The calls that would change or step around the file system view (mount,
 * umount2, pivot_root, chroot, file handles) as an unprivileged process:
 * after dropping to nobody, Linux refuses each one, and so does the
 * sandbox (which refuses them to its root as well, see
 * runsc-shim/tests/real_programs.rs). Argument errors Linux reports before
 * the privilege check (unknown flags, a missing path) come first in both. */
#include "t.h"
#include <grp.h>
#include <sys/mount.h>

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
