/* mount(2) of a tmpfs and umount2(2) by the sandbox's root, in a mount
 * namespace of its own when run natively (the sandbox has one table). */
#include "t.h"
#include <sched.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>

static int in_mounts(const char *needle)
{
	FILE *f = fopen("/proc/self/mounts", "r");
	char line[512];
	int found = 0;
	while (f && fgets(line, sizeof line, f))
		if (strstr(line, needle))
			found = 1;
	if (f)
		fclose(f);
	return found;
}

/* Whether the mount at `path` lists option `opt` in /proc/self/mounts. */
static int has_option(const char *path, const char *opt)
{
	FILE *f = fopen("/proc/self/mounts", "r");
	char line[512], where[256], opts[256];
	int found = 0;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "%*s %255s %*s %255s", where, opts) == 2 && !strcmp(where, path)) {
			found = 0;
			for (char *o = strtok(opts, ","); o; o = strtok(NULL, ","))
				found |= !strcmp(o, opt);
		}
	if (f)
		fclose(f);
	return found;
}

static void show_flags(const char *when, const char *path)
{
	struct statfs sf;
	EXPECT_OK(statfs(path, &sf));
	SHOW("%s: statfs nosuid %d nodev %d noexec %d; listed nosuid %d nodev %d noexec %d", when,
	     !!(sf.f_flags & ST_NOSUID), !!(sf.f_flags & ST_NODEV), !!(sf.f_flags & ST_NOEXEC),
	     has_option(path, "nosuid"), has_option(path, "nodev"), has_option(path, "noexec"));
}

int main(void)
{
	/* Natively: a namespace of our own, nothing propagated out (the
	 * sandbox makes no new namespaces, EINVAL: its table is its own).
	 * Anything else would mount on the host's: stop. */
	if ((unshare(CLONE_NEWNS) != 0 && errno != EINVAL) ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
		SHOW("no mount namespace of our own: %s", errname(errno));
		return 3;
	}

	const char *d = "/tmp/mount_tmpfs_t";
	mkdir(d, 0755);
	close(open("/tmp/mount_tmpfs_t/under", O_CREAT | O_WRONLY, 0644));
	struct stat below, st;
	EXPECT_OK(stat(d, &below));

	EXPECT_ERR(mount("none", "/tmp/mount_tmpfs_nope", "tmpfs", 0, NULL), ENOENT);
	EXPECT_ERR(mount("none", "/tmp/mount_tmpfs_t/under", "tmpfs", 0, NULL), ENOTDIR);
	EXPECT_ERR(mount("none", d, "nosuchfs", 0, NULL), ENODEV);
	EXPECT_ERR(mount("none", d, "tmpfs", 0, "bogus=1"), EINVAL);
	EXPECT_ERR(mount("none", d, "tmpfs", 0, BADPTR), EFAULT);

	EXPECT(mount("none", d, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0710"), 0);
	EXPECT_OK(stat(d, &st));
	SHOW("mounted: mode %o, another device %s", st.st_mode & 07777, st.st_dev != below.st_dev ? "yes" : "no");
	EXPECT_ERR(access("/tmp/mount_tmpfs_t/under", F_OK), ENOENT);
	SHOW("in /proc/self/mounts: %s", in_mounts(" /tmp/mount_tmpfs_t tmpfs ") ? "yes" : "no");
	struct statfs sf;
	EXPECT_OK(statfs(d, &sf));
	SHOW("statfs: tmpfs %s, bsize %ld, blocks %ld", sf.f_type == 0x01021994 ? "yes" : "no", (long)sf.f_bsize, (long)sf.f_blocks);

	int fd = open("/tmp/mount_tmpfs_t/f", O_CREAT | O_RDWR, 0644);
	EXPECT_TRUE(fd >= 0);
	static char chunk[65536];
	long total = 0, n;
	while ((n = write(fd, chunk, sizeof chunk)) > 0)
		total += n;
	SHOW("filled: %ld bytes, then %s", total, errname(errno));
	close(fd);
	EXPECT_ERR(rename("/tmp/mount_tmpfs_t/f", "/tmp/mount_tmpfs_f2"), EXDEV);
	mkdir("/tmp/mount_tmpfs_t/sub", 0755);
	EXPECT_ERR(umount("/tmp/mount_tmpfs_t/sub"), EINVAL);

	/* Only root may mount and unmount. */
	pid_t c = fork();
	if (c == 0) {
		if (setuid(65534))
			_exit(2);
		errno = 0;
		int m = mount("none", "/tmp", "tmpfs", 0, NULL) == -1 && errno == EPERM;
		errno = 0;
		int u = umount(d) == -1 && errno == EPERM;
		_exit(m && u ? 0 : 1);
	}
	int ws;
	waitpid(c, &ws, 0);
	SHOW("nobody may not mount or unmount: %s", WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? "yes" : "no");

	EXPECT(umount(d), 0);
	EXPECT_OK(access("/tmp/mount_tmpfs_t/under", F_OK));
	EXPECT_ERR(umount(d), EINVAL);
	SHOW("after umount, in /proc/self/mounts: %s", in_mounts(" /tmp/mount_tmpfs_t tmpfs ") ? "yes" : "no");

	/* Read-only, then remounted writable. */
	EXPECT(mount("none", d, "tmpfs", MS_RDONLY, NULL), 0);
	EXPECT_ERR(open("/tmp/mount_tmpfs_t/g", O_CREAT | O_WRONLY, 0644), EROFS);
	EXPECT(mount(NULL, d, NULL, MS_REMOUNT, NULL), 0);
	fd = open("/tmp/mount_tmpfs_t/g", O_CREAT | O_WRONLY, 0644);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	EXPECT(umount2(d, MNT_DETACH), 0);

	/* Bind mounts of the tree's own places. */
	const char *src = "/tmp/mount_tmpfs_src";
	mkdir(src, 0755);
	close(open("/tmp/mount_tmpfs_src/s", O_CREAT | O_WRONLY, 0644));
	mkdir("/tmp/mount_tmpfs_src/sub", 0755);
	EXPECT_ERR(mount("/tmp/mount_tmpfs_nope", d, NULL, MS_BIND, NULL), ENOENT);
	EXPECT_ERR(mount("/tmp/mount_tmpfs_src/s", d, NULL, MS_BIND, NULL), ENOTDIR);
	EXPECT(mount(src, d, NULL, MS_BIND, NULL), 0);
	EXPECT_OK(access("/tmp/mount_tmpfs_t/s", F_OK));
	close(open("/tmp/mount_tmpfs_t/via_bind", O_CREAT | O_WRONLY, 0644));
	EXPECT_OK(access("/tmp/mount_tmpfs_src/via_bind", F_OK));
	EXPECT(mount(NULL, d, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL), 0);
	EXPECT_ERR(open("/tmp/mount_tmpfs_t/ro", O_CREAT | O_WRONLY, 0644), EROFS);
	fd = open("/tmp/mount_tmpfs_src/rw", O_CREAT | O_WRONLY, 0644);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	/* A bind of a read-only place is read-only. */
	EXPECT(mount("none", "/tmp/mount_tmpfs_src/sub", "tmpfs", MS_RDONLY, NULL), 0);
	mkdir("/tmp/mount_tmpfs_t2", 0755);
	EXPECT(mount("/tmp/mount_tmpfs_src/sub", "/tmp/mount_tmpfs_t2", NULL, MS_BIND, NULL), 0);
	EXPECT_ERR(open("/tmp/mount_tmpfs_t2/x", O_CREAT | O_WRONLY, 0644), EROFS);
	EXPECT(umount("/tmp/mount_tmpfs_t2"), 0);
	rmdir("/tmp/mount_tmpfs_t2");
	EXPECT(umount("/tmp/mount_tmpfs_src/sub"), 0);
	EXPECT(umount(d), 0);
	EXPECT_ERR(access("/tmp/mount_tmpfs_t/s", F_OK), ENOENT);
	/* A mount below the source comes with a recursive bind only. */
	EXPECT(mount("none", "/tmp/mount_tmpfs_src/sub", "tmpfs", 0, "size=64k"), 0);
	EXPECT(mount(src, d, NULL, MS_BIND, NULL), 0);
	EXPECT_OK(statfs("/tmp/mount_tmpfs_t/sub", &sf));
	SHOW("plain bind: sub is a tmpfs: %s", sf.f_type == 0x01021994 && sf.f_blocks == 16 ? "yes" : "no");
	EXPECT(umount(d), 0);
	EXPECT(mount(src, d, NULL, MS_BIND | MS_REC, NULL), 0);
	EXPECT_OK(statfs("/tmp/mount_tmpfs_t/sub", &sf));
	SHOW("recursive bind: sub is a tmpfs: %s", sf.f_type == 0x01021994 && sf.f_blocks == 16 ? "yes" : "no");
	/* Its submount keeps it busy, unless detached: then both go. */
	EXPECT_ERR(umount(d), EBUSY);
	EXPECT(umount2(d, MNT_DETACH), 0);
	SHOW("after detaching, its submount is gone: %s", in_mounts(" /tmp/mount_tmpfs_t/sub ") ? "no" : "yes");
	EXPECT(umount("/tmp/mount_tmpfs_src/sub"), 0);
	unlink("/tmp/mount_tmpfs_src/s");
	unlink("/tmp/mount_tmpfs_src/via_bind");
	unlink("/tmp/mount_tmpfs_src/rw");
	rmdir("/tmp/mount_tmpfs_src/sub");
	rmdir(src);

	/* A bind of a read-only tmpfs remounted writable (with MS_BIND: that
	 * mount only) stays read-only, as the file system is; a remount of
	 * the tmpfs itself makes both writable. */
	EXPECT(mount("none", d, "tmpfs", MS_RDONLY, NULL), 0);
	mkdir("/tmp/mount_tmpfs_t2", 0755);
	EXPECT(mount(d, "/tmp/mount_tmpfs_t2", NULL, MS_BIND, NULL), 0);
	EXPECT(mount(NULL, "/tmp/mount_tmpfs_t2", NULL, MS_REMOUNT | MS_BIND, NULL), 0);
	EXPECT_ERR(open("/tmp/mount_tmpfs_t2/w", O_CREAT | O_WRONLY, 0644), EROFS);
	EXPECT(mount(NULL, d, NULL, MS_REMOUNT, NULL), 0);
	fd = open("/tmp/mount_tmpfs_t2/w", O_CREAT | O_WRONLY, 0644);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	EXPECT_OK(access("/tmp/mount_tmpfs_t/w", F_OK));
	EXPECT(umount("/tmp/mount_tmpfs_t2"), 0);
	rmdir("/tmp/mount_tmpfs_t2");
	EXPECT(umount(d), 0);

	/* Per-mount flags: listed and in statfs; on a noexec mount a program
	 * is not executable (access, execve: EACCES) nor mappable with
	 * PROT_EXEC (EPERM); a remount sets the flags anew, and a bind takes
	 * those of the mount it binds. */
	EXPECT(mount("none", d, "tmpfs", MS_NOSUID | MS_NOEXEC, NULL), 0);
	show_flags("nosuid,noexec", d);
	int in = open("/bin/true", O_RDONLY), out = open("/tmp/mount_tmpfs_t/prog", O_CREAT | O_WRONLY, 0755);
	EXPECT_TRUE(in >= 0 && out >= 0);
	while ((n = read(in, chunk, sizeof chunk)) > 0)
		EXPECT(write(out, chunk, n), n);
	close(in);
	close(out);
	EXPECT_ERR(access("/tmp/mount_tmpfs_t/prog", X_OK), EACCES);
	EXPECT_OK(access("/tmp/mount_tmpfs_t/prog", R_OK));
	char *args[] = {"prog", NULL};
	EXPECT_ERR(execve("/tmp/mount_tmpfs_t/prog", args, args + 1), EACCES);
	fd = open("/tmp/mount_tmpfs_t/prog", O_RDONLY);
	EXPECT_TRUE(mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED && errno == EPERM);
	void *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	EXPECT_TRUE(p != MAP_FAILED);
	/* nor made executable later (no VM_MAYEXEC) */
	EXPECT_ERR(mprotect(p, 4096, PROT_READ | PROT_EXEC), EACCES);
	munmap(p, 4096);
	close(fd);
	EXPECT(mount(NULL, d, NULL, MS_REMOUNT | MS_NODEV, NULL), 0);
	show_flags("remounted nodev", d);
	EXPECT_OK(access("/tmp/mount_tmpfs_t/prog", X_OK));
	mkdir("/tmp/mount_tmpfs_t2", 0755);
	EXPECT(mount(NULL, d, NULL, MS_REMOUNT | MS_NOEXEC, NULL), 0);
	EXPECT(mount(d, "/tmp/mount_tmpfs_t2", NULL, MS_BIND | MS_NOSUID, NULL), 0);
	show_flags("bound from noexec", "/tmp/mount_tmpfs_t2");
	EXPECT_ERR(access("/tmp/mount_tmpfs_t2/prog", X_OK), EACCES);
	EXPECT(umount("/tmp/mount_tmpfs_t2"), 0);
	rmdir("/tmp/mount_tmpfs_t2");
	EXPECT(umount(d), 0);

	unlink("/tmp/mount_tmpfs_t/under");
	rmdir(d);
	return t_done();
}
