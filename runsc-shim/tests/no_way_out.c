/* Attacks on `ferrovisor do --root DIR` that must not reach a host file
 * outside DIR: file handles, chroot, pivot_root, mount, and a rename race
 * against a symlink swap. Compiled static and run by real_programs.rs,
 * which puts a secret file at SECRET on the host, outside DIR, and a decoy
 * at DIR/SECRET (the same path inside the sandbox).
 *
 *   no_way_out mkhandle PATH      (natively) print PATH's file handle in hex
 *   no_way_out handles SECRET HEX try to open the secret by handle
 *   no_way_out chroot SECRET      chroot, and the held-descriptor escape
 *   no_way_out pivot SECRET       pivot_root
 *   no_way_out mount SECRET       mount proc, tmpfs, a bind of /; umount
 *   no_way_out race SECRET N      open through a directory that another
 *                                 process keeps swapping with a symlink to /
 *   no_way_out proclinks SECRET   through /proc/self/root, /proc/1/root,
 *                                 /proc/self/cwd, /proc/[pid]/fd/N (this
 *                                 process's and a child's), and hard links
 *
 * Each line says what a call answered; any content read is printed as
 * "read: <content>", so the test sees whatever leaked. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

struct handle {
	unsigned int bytes;
	int type;
	unsigned char f[128];
};

static void say(const char *what, long r)
{
	if (r < 0)
		printf("%s: %s\n", what, strerrorname_np(errno));
	else
		printf("%s: ok\n", what);
}

/* Reads PATH (relative to DIRFD) and prints what it holds, or the error. */
static void try_read(const char *label, int dirfd, const char *path)
{
	char buf[256];
	int fd = openat(dirfd, path, O_RDONLY);
	if (fd < 0) {
		printf("%s: %s\n", label, strerrorname_np(errno));
		return;
	}
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	buf[n < 0 ? 0 : n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	printf("%s: read: %s\n", label, buf);
}

/* The secret's path relative to the current directory, by `..` chains. */
static void try_dotdots(const char *label, const char *secret)
{
	char path[4096] = "";
	for (int i = 0; i < 40; i++)
		strcat(path, "../");
	strcat(path, secret + 1);
	try_read(label, AT_FDCWD, path);
}

static int mkhandle(const char *path)
{
	struct handle h = { .bytes = sizeof h.f };
	int mount_id;
	if (syscall(SYS_name_to_handle_at, AT_FDCWD, path, &h, &mount_id, 0) < 0) {
		perror("name_to_handle_at");
		return 1;
	}
	printf("%d:", h.type);
	for (unsigned i = 0; i < h.bytes; i++)
		printf("%02x", h.f[i]);
	printf("\n");
	return 0;
}

static int handles(const char *secret, const char *hex)
{
	struct handle h = { .bytes = sizeof h.f };
	int mount_id;
	say("name_to_handle_at(secret)",
	    syscall(SYS_name_to_handle_at, AT_FDCWD, secret, &h, &mount_id, 0));
	say("name_to_handle_at(/bin/busybox)",
	    syscall(SYS_name_to_handle_at, AT_FDCWD, "/bin/busybox", &h, &mount_id, 0));
	say("name_to_handle_at(/, AT_EMPTY_PATH)",
	    syscall(SYS_name_to_handle_at, open("/", O_RDONLY), "", &h, &mount_id,
		    AT_EMPTY_PATH));

	/* The secret's real host handle, made natively by the test. */
	struct handle real = { 0 };
	const char *p = strchr(hex, ':');
	real.type = atoi(hex);
	for (p = p ? p + 1 : hex; p[0] && p[1] && real.bytes < sizeof real.f; p += 2)
		sscanf(p, "%2hhx", &real.f[real.bytes++]);
	int root = open("/", O_RDONLY | O_DIRECTORY);
	int fd = syscall(SYS_open_by_handle_at, root, &real, O_RDONLY);
	say("open_by_handle_at(host handle of the secret)", fd);
	if (fd >= 0)
		try_read("read by handle", fd, "");

	/* "shocker": guess handles, inode by inode, from every directory. */
	int opened = 0, eperm = 0;
	const char *dirs[] = { "/", "/tmp", "/proc", "/bin" };
	for (unsigned d = 0; d < sizeof dirs / sizeof *dirs; d++) {
		int dfd = open(dirs[d], O_RDONLY | O_DIRECTORY);
		for (unsigned ino = 1; ino < 256; ino++) {
			struct handle g = { .bytes = 8, .type = 1 };
			memcpy(g.f, &ino, sizeof ino);
			int r = syscall(SYS_open_by_handle_at, dfd, &g, O_RDONLY);
			if (r >= 0) {
				opened++;
				close(r);
			} else if (errno == EPERM) {
				eperm++;
			}
		}
		close(dfd);
	}
	printf("guessed handles opened: %d, refused with EPERM: %d\n", opened, eperm);
	try_read("secret by path", AT_FDCWD, secret);
	return 0;
}

static void show_cwd(const char *label)
{
	char cwd[4096];
	/* The system call: glibc's getcwd() refuses "(unreachable)/...". */
	long n = syscall(SYS_getcwd, cwd, sizeof cwd);
	printf("%s: %s\n", label, n > 0 ? cwd : strerrorname_np(errno));
}

static int do_chroot(const char *secret)
{
	mkdir("/tmp/jail", 0755);
	mkdir("/tmp/jail/inner", 0755);
	int outside = open("/", O_RDONLY | O_DIRECTORY);
	say("chdir(/tmp/jail/inner)", chdir("/tmp/jail/inner"));
	say("chroot(/tmp/jail)", chroot("/tmp/jail"));
	show_cwd("cwd in the jail");
	say("chroot(.)", chroot("."));
	show_cwd("cwd in the inner jail");
	say("secret in the jail", access(secret, F_OK));
	/* The classic escape: a descriptor held from before the chroot, then
	 * `..` until the top: out of the chroot, as on Linux, but the top is
	 * the sandbox's root. */
	say("fchdir(held /)", fchdir(outside));
	for (int i = 0; i < 64; i++)
		chdir("..");
	show_cwd("cwd after 64 x ..");
	say("chroot(.) after ..", chroot("."));
	show_cwd("cwd after chroot(.)");
	try_dotdots("secret by .. chain", secret);
	try_read("secret by path", AT_FDCWD, secret);
	try_read("secret from the held descriptor", outside, secret + 1);
	/* What the top directory holds: the sandbox's root, nothing more. */
	struct dirent **names;
	int n = scandir(".", &names, NULL, alphasort);
	printf("top directory:");
	for (int i = 0; i < n; i++)
		printf(" %s", names[i]->d_name);
	printf("\n");
	return 0;
}

static int pivot(const char *secret)
{
	mkdir("/tmp/new", 0755);
	mkdir("/tmp/new/old", 0755);
	say("pivot_root(/tmp/new, /tmp/new/old)",
	    syscall(SYS_pivot_root, "/tmp/new", "/tmp/new/old"));
	say("chdir(/)", chdir("/"));
	say("pivot_root(., .)", syscall(SYS_pivot_root, ".", "."));
	say("umount2(., MNT_DETACH)", umount2(".", MNT_DETACH));
	try_read("secret by path", AT_FDCWD, secret);
	try_dotdots("secret by .. chain", secret);
	try_read("decoy still there", AT_FDCWD, secret);
	return 0;
}

static int do_mount(const char *secret)
{
	char host_dir[4096];
	snprintf(host_dir, sizeof host_dir, "%s", secret);
	*strrchr(host_dir, '/') = 0;
	mkdir("/tmp/m", 0755);
	say("mount(proc)", mount("proc", "/tmp/m", "proc", 0, NULL));
	say("mount(tmpfs)", mount("tmpfs", "/tmp/m", "tmpfs", 0, "size=1m"));
	say("mount(bind /)", mount("/", "/tmp/m", NULL, MS_BIND | MS_REC, NULL));
	say("mount(bind of the secret's directory)", mount(host_dir, "/tmp/m", NULL, MS_BIND, NULL));
	say("mount(remount / rw)", mount(NULL, "/", NULL, MS_REMOUNT, NULL));
	say("mount(move /proc)", mount("/proc", "/tmp/m", NULL, MS_MOVE, NULL));
	say("umount2(/proc)", umount2("/proc", MNT_DETACH));
	say("umount2(/tmp)", umount2("/tmp", 0));
	/* The new mount API: each call must fail too. */
	say("fsopen(tmpfs)", syscall(SYS_fsopen, "tmpfs", 0));
	say("open_tree(/)", syscall(SYS_open_tree, AT_FDCWD, "/", 1 /* OPEN_TREE_CLONE */));
	say("move_mount", syscall(SYS_move_mount, AT_FDCWD, "/proc", AT_FDCWD, "/tmp/m", 0));
	say("mount_setattr", syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, NULL, 0));
	/* /tmp/m is still the empty directory it was. */
	DIR *d = opendir("/tmp/m");
	int n = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		n++;
	printf("/tmp/m entries: %d\n", n);
	char path[4096];
	snprintf(path, sizeof path, "/tmp/m%s", secret);
	try_read("secret through /tmp/m", AT_FDCWD, path);
	snprintf(path, sizeof path, "/tmp/m/%s", strrchr(secret, '/') + 1);
	try_read("secret's name in /tmp/m", AT_FDCWD, path);
	return 0;
}

/* One process swaps /tmp/race/d (a directory) and /tmp/race/l (a symlink
 * to /) with RENAME_EXCHANGE as fast as it can; this one opens
 * /tmp/race/d/SECRET, N times. If the Sentry resolved paths by handing
 * them to the host, or checked `d` and then used it after the swap, the
 * symlink would lead to the host's /. */
static int race(const char *secret, int n)
{
	mkdir("/tmp/race", 0755);
	mkdir("/tmp/race/d", 0755);
	if (symlink("/", "/tmp/race/l") < 0) {
		perror("symlink");
		return 1;
	}
	int ready[2];
	if (pipe(ready) < 0)
		return 1;
	pid_t swapper = fork();
	if (swapper == 0) {
		for (long i = 0;; i++) {
			if (syscall(SYS_renameat2, AT_FDCWD, "/tmp/race/d", AT_FDCWD,
				    "/tmp/race/l", 2 /* RENAME_EXCHANGE */) < 0) {
				perror("renameat2");
				_exit(1);
			}
			if (i == 0)
				close(ready[1]);
		}
	}
	close(ready[1]);
	char c;
	read(ready[0], &c, 1); /* end of file once the first swap is done */
	char via_d[4096], via_dotdot[4096];
	snprintf(via_d, sizeof via_d, "/tmp/race/d%s", secret);
	snprintf(via_dotdot, sizeof via_dotdot, "/tmp/race/d/../../../..%s", secret);
	/* [path][leaked, decoy, missing, other] */
	int count[2][4] = { { 0 } };
	char buf[256];
	for (int i = 0; i < n; i++) {
		int k = i % 2;
		/* A varying number of calls between opens, so that even a
		 * scheduler that runs the two processes in lock-step (one
		 * system call each) lets the opens meet both shapes. */
		for (int j = 0; j < (i / 2) % 3; j++)
			getppid();
		int fd = open(k ? via_dotdot : via_d, O_RDONLY);
		if (fd < 0) {
			count[k][errno == ENOENT ? 2 : 3]++;
			continue;
		}
		ssize_t r = read(fd, buf, sizeof buf - 1);
		close(fd);
		buf[r < 0 ? 0 : r] = 0;
		if (strstr(buf, "HOST-SECRET"))
			count[k][0]++;
		else if (strstr(buf, "inside-decoy"))
			count[k][1]++;
		else
			count[k][3]++;
	}
	kill(swapper, SIGKILL);
	int status;
	waitpid(swapper, &status, 0);
	printf("swapper still swapping at the end: %s\n",
	       WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? "yes" : "no");
	for (int k = 0; k < 2; k++)
		printf("%s: leaked=%d decoy=%d missing=%d other=%d\n", k ? "via .." : "via d",
		       count[k][0], count[k][1], count[k][2], count[k][3]);
	return 0;
}

/* Prints what readlink says of PATH, or the error. */
static void show_link(const char *label, const char *path)
{
	char buf[4096];
	ssize_t n = readlink(path, buf, sizeof buf - 1);
	if (n < 0) {
		printf("%s: %s\n", label, strerrorname_np(errno));
		return;
	}
	buf[n] = 0;
	printf("%s: -> %s\n", label, buf);
}

/* The /proc links that name a process's root, working directory and open
 * files: in the sandbox they lead to the sandbox's files (guest paths), never
 * to the host's; and hard links, which could pin a host file. */
static int proclinks(const char *secret)
{
	char dir[4096], path[8192], dots[4096] = "";
	const char *name = strrchr(secret, '/') + 1;
	snprintf(dir, sizeof dir, "%s", secret);
	*strrchr(dir, '/') = 0;
	for (int i = 0; i < 40; i++)
		strcat(dots, "../");

	/* Roots: this process's and init's (the sandbox's first process). */
	show_link("readlink /proc/self/root", "/proc/self/root");
	show_link("readlink /proc/1/root", "/proc/1/root");
	snprintf(path, sizeof path, "/proc/self/root%s", secret);
	try_read("secret via /proc/self/root", AT_FDCWD, path);
	snprintf(path, sizeof path, "/proc/1/root%s", secret);
	try_read("secret via /proc/1/root", AT_FDCWD, path);
	snprintf(path, sizeof path, "/proc/self/root/%s%s", dots, secret + 1);
	try_read("secret via /proc/self/root/..", AT_FDCWD, path);
	snprintf(path, sizeof path, "/proc/1/root/%s%s", dots, secret + 1);
	try_read("secret via /proc/1/root/..", AT_FDCWD, path);
	int root = open("/proc/self/root", O_RDONLY | O_DIRECTORY);
	say("open(/proc/self/root)", root);
	try_read("secret from an open /proc/self/root", root, secret + 1);

	/* The working directory, in the secret's directory (the decoy's,
	 * inside the sandbox). */
	say("chdir(secret's directory)", chdir(dir));
	show_link("readlink /proc/self/cwd", "/proc/self/cwd");
	snprintf(path, sizeof path, "/proc/self/cwd/%s", name);
	try_read("secret via /proc/self/cwd", AT_FDCWD, path);
	snprintf(path, sizeof path, "/proc/self/cwd/%s%s", dots, secret + 1);
	try_read("secret via /proc/self/cwd/..", AT_FDCWD, path);
	say("chdir(/proc/self/cwd/..)", chdir("/proc/self/cwd/.."));
	say("chdir(/)", chdir("/"));

	/* Descriptors: of the secret's directory, of the file itself, of /. */
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	int ffd = open(secret, O_RDONLY);
	int top = open("/", O_RDONLY | O_DIRECTORY);
	printf("descriptors: %s\n", dfd == 3 + (root >= 0) && ffd == dfd + 1 && top == ffd + 1 ?
					     "as expected" : "unexpected numbers");
	snprintf(path, sizeof path, "/proc/self/fd/%d", dfd);
	show_link("readlink /proc/self/fd/DIR", path);
	snprintf(path, sizeof path, "/proc/self/fd/%d", ffd);
	show_link("readlink /proc/self/fd/FILE", path);
	snprintf(path, sizeof path, "/proc/self/fd/%d", top);
	show_link("readlink /proc/self/fd/ROOT", path);
	snprintf(path, sizeof path, "/proc/self/fd/%d/%s", dfd, name);
	try_read("secret via /proc/self/fd/DIR", AT_FDCWD, path);
	snprintf(path, sizeof path, "/proc/self/fd/%d", ffd);
	try_read("secret via /proc/self/fd/FILE", AT_FDCWD, path);
	snprintf(path, sizeof path, "/proc/self/fd/%d%s", top, secret);
	try_read("secret via /proc/self/fd/ROOT", AT_FDCWD, path);
	snprintf(path, sizeof path, "/proc/self/fd/%d/%s%s", dfd, dots, secret + 1);
	try_read("secret via /proc/self/fd/DIR/..", AT_FDCWD, path);
	/* Another process's descriptors, by its pid. */
	int ready[2], done[2];
	if (pipe(ready) < 0 || pipe(done) < 0)
		return 1;
	pid_t child = fork();
	if (child == 0) {
		int held = open(dir, O_RDONLY | O_DIRECTORY);
		char c;
		if (held >= 0)
			dup2(held, 100);
		write(ready[1], "x", 1);
		read(done[0], &c, 1);
		_exit(0);
	}
	char c;
	read(ready[0], &c, 1);
	snprintf(path, sizeof path, "/proc/%d/fd/100", child);
	show_link("readlink /proc/CHILD/fd/100", path);
	snprintf(path, sizeof path, "/proc/%d/fd/100/%s", child, name);
	try_read("secret via /proc/CHILD/fd/100", AT_FDCWD, path);
	snprintf(path, sizeof path, "/proc/%d/root%s", child, secret);
	try_read("secret via /proc/CHILD/root", AT_FDCWD, path);
	snprintf(path, sizeof path, "/proc/%d/cwd/%s%s", child, dots, secret + 1);
	try_read("secret via /proc/CHILD/cwd/..", AT_FDCWD, path);
	write(done[1], "x", 1);
	waitpid(child, NULL, 0);

	/* Hard links: of the secret's path, through the /proc links, of the
	 * open descriptor; to /tmp (another file system) and beside it (the
	 * read-only root). */
	say("link(secret, /tmp/hl)", link(secret, "/tmp/hl"));
	snprintf(path, sizeof path, "/proc/self/root/%s%s", dots, secret + 1);
	say("link(/proc/self/root/..secret, /tmp/hl)", link(path, "/tmp/hl"));
	snprintf(path, sizeof path, "/proc/self/fd/%d", ffd);
	say("linkat(/proc/self/fd/FILE, /tmp/hl, AT_SYMLINK_FOLLOW)",
	    linkat(AT_FDCWD, path, AT_FDCWD, "/tmp/hl", AT_SYMLINK_FOLLOW));
	say("linkat(FILE, \"\", /tmp/hl, AT_EMPTY_PATH)",
	    linkat(ffd, "", AT_FDCWD, "/tmp/hl", AT_EMPTY_PATH));
	snprintf(path, sizeof path, "%s/hl", dir);
	say("link(secret, beside it)", link(secret, path));
	try_read("/tmp/hl", AT_FDCWD, "/tmp/hl");
	try_read("hard link beside it", AT_FDCWD, path);
	try_read("secret by path", AT_FDCWD, secret);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3)
		return 2;
	const char *mode = argv[1], *arg = argv[2];
	if (!strcmp(mode, "mkhandle"))
		return mkhandle(arg);
	if (!strcmp(mode, "handles") && argc == 4)
		return handles(arg, argv[3]);
	if (!strcmp(mode, "chroot"))
		return do_chroot(arg);
	if (!strcmp(mode, "pivot"))
		return pivot(arg);
	if (!strcmp(mode, "mount"))
		return do_mount(arg);
	if (!strcmp(mode, "proclinks"))
		return proclinks(arg);
	if (!strcmp(mode, "race") && argc == 4)
		return race(arg, atoi(argv[3]));
	return 2;
}
