/* /proc/PID/mountinfo and /proc/PID/mounts as seen from a chroot: mounts
 * outside the process's root are left out, the others are named from that
 * root, and a mount's parent ID stays the real one (Linux's
 * show_mountinfo()); the table is the target process's view, whoever reads
 * it. The jail is a tmpfs mount point with a second tmpfs at its "shm"
 * and an mqueue file system at its "mqueue": natively one made in a
 * private mount namespace (we are root), in the
 * sandbox, which refuses mount(2), its /dev, which is exactly that. The
 * tables are read through a /proc descriptor opened before the chroot. */
#include "t.h"
#include <sched.h>
#include <sys/mount.h>

static char text[65536];

/* Reads `name` under the directory `proc` into `text`. */
static int slurp_at(int proc, const char *name)
{
	int fd = openat(proc, name, O_RDONLY);
	if (fd < 0)
		return -1;
	size_t len = 0;
	ssize_t n;
	while (len + 1 < sizeof text && (n = read(fd, text + len, sizeof text - 1 - len)) > 0)
		len += n;
	text[len] = 0;
	close(fd);
	return (int)len;
}

/* Prints table `name` (under `proc`) line by line as "mount point, type",
 * and for mountinfo whether the mount's parent is shown as "/" (top) or is
 * not shown at all (outside); each line starts with `label`. */
static void show(int proc, const char *name, const char *label)
{
	int info = strstr(name, "mountinfo") != NULL;
	if (slurp_at(proc, name) < 0) {
		printf("%s: cannot open: %s\n", label, errname(errno));
		t_fail("open");
		return;
	}
	int root_id = -1;
	for (char *l = text; *l; l = strchr(l, '\n') + 1) {
		int id, parent;
		char point[512];
		if (info && sscanf(l, "%d %d %*s %*s %511s", &id, &parent, point) == 3 &&
		    strcmp(point, "/") == 0)
			root_id = id;
		if (!strchr(l, '\n'))
			break;
	}
	int lines = 0;
	for (char *l = text; *l; l = strchr(l, '\n') + 1) {
		char point[512], type[64];
		int id, parent;
		lines++;
		if (info) {
			char *dash = strstr(l, " - ");
			if (sscanf(l, "%d %d %*s %*s %511s", &id, &parent, point) != 3 || !dash ||
			    sscanf(dash + 3, "%63s", type) != 1) {
				t_fail("a mountinfo line");
				break;
			}
			printf("%s: %s %s parent %s\n", label, point, type,
			       parent == root_id ? "top" : "outside");
		} else {
			if (sscanf(l, "%*s %511s %63s", point, type) != 2) {
				t_fail("a mounts line");
				break;
			}
			printf("%s: %s %s\n", label, point, type);
		}
		if (!strchr(l, '\n'))
			break;
	}
	printf("%s: %d lines\n", label, lines);
}

int main(void)
{
	char base[64] = "/tmp/mountinfo-chroot-XXXXXX";
	char jail[64], shm[96], sub[128];
	/* Natively: a private namespace where the jail and its shm are
	 * tmpfs mounts; nothing here is seen outside it. */
	int native = unshare(CLONE_NEWNS) == 0 &&
		     mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
	if (native) {
		if (!mkdtemp(base) || mount("tmpfs", base, "tmpfs", 0, "size=1m") != 0)
			t_fail("a tmpfs for the jail");
		snprintf(shm, sizeof shm, "%s/shm", base);
		if (mkdir(shm, 0755) != 0 || mount("tmpfs", shm, "tmpfs", 0, "size=1m") != 0)
			t_fail("a tmpfs at its shm");
		/* and an mqueue file system beside it, as the sandbox's /dev
		 * has */
		char mq[96];
		snprintf(mq, sizeof mq, "%s/mqueue", base);
		if (mkdir(mq, 0755) != 0 ||
		    mount("mqueue", mq, "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
			t_fail("an mqueue file system at its mqueue");
		snprintf(jail, sizeof jail, "%s", base);
	} else {
		snprintf(jail, sizeof jail, "/dev");
		snprintf(shm, sizeof shm, "/dev/shm");
	}
	snprintf(sub, sizeof sub, "%s/sub", shm);
	EXPECT(mkdir(sub, 0755), 0);
	int proc = open("/proc", O_RDONLY | O_DIRECTORY);
	EXPECT_TRUE(proc >= 0);

	int go[2], done[2];
	EXPECT(pipe(go), 0);
	EXPECT(pipe(done), 0);
	pid_t child = fork();
	if (child == 0) {
		char c;
		EXPECT(chroot(jail), 0);
		EXPECT(chdir("/"), 0);
		/* Its root is the jail's mount: that one and the one below. */
		show(proc, "self/mountinfo", "self/mountinfo");
		show(proc, "self/mounts", "self/mounts");
		fflush(stdout);
		/* The parent, outside, reads this process's table. */
		if (write(go[1], "c", 1) != 1 || read(done[0], &c, 1) != 1)
			t_fail("a hand-shake with the parent");
		/* A root on the mount below: only that mount, named "/". */
		EXPECT(chroot("shm"), 0);
		EXPECT(chdir("/"), 0);
		show(proc, "self/mountinfo", "self/mountinfo");
		/* A root that is no mount point, with none below: nothing. */
		EXPECT(chroot("sub"), 0);
		show(proc, "self/mountinfo", "self/mountinfo");
		show(proc, "self/mounts", "self/mounts");
		_exit(t_done());
	}
	char c, path[64];
	EXPECT(read(go[0], &c, 1), 1);
	snprintf(path, sizeof path, "%d/mountinfo", (int)child);
	/* Not this process's view, the child's. */
	show(proc, path, "PID/mountinfo from outside");
	fflush(stdout);
	/* Silently: the child prints next. */
	if (write(done[1], "c", 1) != 1)
		t_fail("a hand-shake with the child");
	int status;
	EXPECT_TRUE(waitpid(child, &status, 0) == child);
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	EXPECT(rmdir(sub), 0);
	if (native) {
		umount2(shm, MNT_DETACH);
		umount2(base, MNT_DETACH);
		rmdir(base);
	}
	return t_done();
}
