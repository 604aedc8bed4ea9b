/* chroot(2) as root: absolute paths, absolute symlinks and `..` are bound
 * by the new root; getcwd names a working directory outside it
 * "(unreachable)"; fork and execve keep it; /proc/PID/root names it; and
 * the classic escape (a directory held from outside, then `..` up to the
 * top) climbs out of the chroot, as on Linux, up to the real root (in the
 * sandbox: the sandbox's root, see real_programs.rs for a --root DIR run
 * that shows it goes no further). */
#include "t.h"

static char base[128];

static void path_of(char *out, size_t n, const char *rel)
{
	snprintf(out, n, "%s/%s", base, rel);
}

static int cwd_is(const char *want)
{
	char buf[4096];
	/* The system call itself: glibc's getcwd() refuses "(unreachable)". */
	long n = syscall(SYS_getcwd, buf, sizeof buf);
	return n > 0 && strcmp(buf, want) == 0;
}

static int cwd_unreachable(void)
{
	char buf[4096];
	long n = syscall(SYS_getcwd, buf, sizeof buf);
	return n > 0 && strncmp(buf, "(unreachable)/", 14) == 0;
}

static void put(const char *rel, const char *text)
{
	char p[256];
	path_of(p, sizeof p, rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	if (fd >= 0) {
		if (write(fd, text, strlen(text)) < 0)
			perror("write");
		close(fd);
	}
}

static int probe(void)
{
	/* Run by execve inside the chroot: the root stayed. */
	char buf[64];
	EXPECT(t_slurp("/inside", buf, sizeof buf), 7);
	EXPECT_ERR(access("/outside", F_OK), ENOENT);
	EXPECT_TRUE(cwd_is("/sub"));
	return t_done();
}

static void copy_self(const char *rel)
{
	char p[256], buf[65536];
	path_of(p, sizeof p, rel);
	int in = open("/proc/self/exe", O_RDONLY);
	int out = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	ssize_t n;
	while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
		if (write(out, buf, n) != n)
			break;
	close(in);
	close(out);
}

static int jailed(int held, int sync_w, int sync_r, struct stat *top, struct stat *jail)
{
	char buf[64];
	struct stat st;
	EXPECT_ERR(chroot("nope"), ENOENT);
	EXPECT_ERR(chroot("outside"), ENOTDIR);
	EXPECT(chroot("jail"), 0);

	/* Tell the parent, which reads /proc/PID/root, and wait for it
	 * (silently: the two processes' lines must not interleave). */
	if (write(sync_w, "r", 1) != 1 || read(sync_r, buf, 1) != 1)
		t_fail("a hand-shake with the parent");

	/* The working directory is still outside the new root. */
	EXPECT_TRUE(cwd_unreachable());
	EXPECT(t_slurp("outside", buf, sizeof buf), 8);
	/* Absolute paths, absolute symlinks and `..` stay inside. */
	EXPECT(t_slurp("/inside", buf, sizeof buf), 7);
	EXPECT(t_slurp("/abs", buf, sizeof buf), 7);
	EXPECT(t_slurp("/sub/up/inside", buf, sizeof buf), 7);
	EXPECT(t_slurp("/../../../inside", buf, sizeof buf), 7);
	EXPECT_ERR(access("/outside", F_OK), ENOENT);
	EXPECT(stat("/..", &st), 0);
	EXPECT_TRUE(st.st_ino == jail->st_ino && st.st_dev == jail->st_dev);
	EXPECT(chdir("/"), 0);
	EXPECT_TRUE(cwd_is("/"));
	EXPECT(chdir("sub"), 0);
	EXPECT_TRUE(cwd_is("/sub"));
	EXPECT(chdir("../../.."), 0);
	EXPECT_TRUE(cwd_is("/"));
	EXPECT(chdir("/sub"), 0);

	/* fork keeps the root; so does execve. */
	pid_t pid = fork();
	if (pid == 0) {
		int ok = access("/inside", F_OK) == 0 && access("/outside", F_OK) < 0;
		_exit(ok ? 0 : 1);
	}
	int status = -1;
	EXPECT_TRUE(waitpid(pid, &status, 0) == pid);
	EXPECT(status, 0);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		char *argv[] = { "/probe", "probe", NULL };
		execv("/probe", argv);
		_exit(127);
	}
	EXPECT_TRUE(waitpid(pid, &status, 0) == pid);
	EXPECT(status, 0);

	/* The classic escape: a directory held from before, then `..` up to
	 * the top. It leaves the chroot (as on Linux) for the real root. */
	EXPECT(fchdir(held), 0);
	for (int i = 0; i < 64; i++)
		chdir("..");
	EXPECT(stat(".", &st), 0);
	EXPECT_TRUE(st.st_ino == top->st_ino && st.st_dev == top->st_dev);
	EXPECT_TRUE(cwd_is("(unreachable)/"));
	EXPECT_ERR(access(FIX("file.txt"), F_OK), ENOENT);
	/* chroot(".") from there gives the whole view back. */
	EXPECT(chroot("."), 0);
	EXPECT_TRUE(cwd_is("/"));
	EXPECT(t_slurp(FIX("file.txt"), buf, sizeof buf), 14);
	return t_done();
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "probe") == 0)
		return probe();

	char p[256];
	snprintf(base, sizeof base, "/tmp/ferrovisor-chroot-%d", (int)getpid());
	EXPECT(mkdir(base, 0755), 0);
	path_of(p, sizeof p, "jail");
	EXPECT(mkdir(p, 0755), 0);
	path_of(p, sizeof p, "jail/sub");
	EXPECT(mkdir(p, 0755), 0);
	put("jail/inside", "inside\n");
	put("outside", "outside\n");
	path_of(p, sizeof p, "jail/abs");
	EXPECT(symlink("/inside", p), 0);
	path_of(p, sizeof p, "jail/sub/up");
	EXPECT(symlink("../../..", p), 0);
	copy_self("jail/probe");

	struct stat top, jail;
	EXPECT(stat("/", &top), 0);
	path_of(p, sizeof p, "jail");
	EXPECT(stat(p, &jail), 0);
	int held = open(base, O_RDONLY | O_DIRECTORY);
	EXPECT_TRUE(held >= 0);
	EXPECT(chdir(base), 0);

	int to_parent[2], to_child[2];
	EXPECT(pipe(to_parent), 0);
	EXPECT(pipe(to_child), 0);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		exit(jailed(held, to_parent[1], to_child[0], &top, &jail));
	char c, link[512], want[256];
	/* /proc/PID/root of the chrooted child names its root. */
	if (read(to_parent[0], &c, 1) == 1) {
		snprintf(p, sizeof p, "/proc/%d/root", (int)pid);
		ssize_t n = readlink(p, link, sizeof link - 1);
		link[n > 0 ? n : 0] = 0;
		path_of(want, sizeof want, "jail");
		EXPECT_TRUE(strcmp(link, want) == 0);
		/* Our own root is the real one. */
		n = readlink("/proc/self/root", link, sizeof link - 1);
		link[n > 0 ? n : 0] = 0;
		EXPECT_TRUE(strcmp(link, "/") == 0);
	}
	fflush(stdout);
	if (write(to_child[1], "g", 1) != 1)
		t_fail("a hand-shake with the child");
	int status = -1;
	EXPECT_TRUE(waitpid(pid, &status, 0) == pid);
	EXPECT(status, 0);
	/* The parent's own view never changed. */
	EXPECT_TRUE(cwd_is(base));
	EXPECT(t_slurp(FIX("file.txt"), p, sizeof p), 14);

	const char *files[] = { "jail/inside", "jail/abs", "jail/sub/up",
				"jail/probe", "outside" };
	for (unsigned i = 0; i < sizeof files / sizeof *files; i++) {
		path_of(p, sizeof p, files[i]);
		EXPECT(unlink(p), 0);
	}
	path_of(p, sizeof p, "jail/sub");
	EXPECT(rmdir(p), 0);
	path_of(p, sizeof p, "jail");
	EXPECT(rmdir(p), 0);
	EXPECT(rmdir(base), 0);
	return t_done();
}
