/* Landlock (landlock(7)), ABI 7: the three calls' errors, then each kind
 * of access checked in a child that restricted itself: opens for reading,
 * writing, listing and truncating, exec, make and remove, renames and
 * links within and across directories (REFER), mounts, pathname sockets,
 * a rule on a single file, stacked layers, inheritance by fork, the
 * no_new_privs requirement, TCP bind and connect by port, ioctls on
 * devices, and signals and abstract Unix sockets scoped to the domain. */
#include "t.h"

#include <netinet/in.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <termios.h>

#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>

#define LL_EXECUTE (1ULL << 0)
#define LL_WRITE_FILE (1ULL << 1)
#define LL_READ_FILE (1ULL << 2)
#define LL_READ_DIR (1ULL << 3)
#define LL_REFER (1ULL << 13)
#define LL_TRUNCATE (1ULL << 14)
#define LL_IOCTL_DEV (1ULL << 15)
#define LL_ALL ((1ULL << 16) - 1)
#define LL_BIND_TCP (1ULL << 0)
#define LL_CONNECT_TCP (1ULL << 1)

struct ll_port {
	unsigned long long allowed, port;
};

struct ll_attr {
	unsigned long long fs, net, scoped, pad;
};

struct ll_path {
	unsigned long long allowed;
	int fd;
} __attribute__((packed));

static char base[64];

static const char *at(const char *rel)
{
	static char bufs[4][256];
	static int n;
	char *b = bufs[n++ % 4];
	snprintf(b, 256, "%s/%s", base, rel);
	return b;
}

static long create_ruleset(unsigned long long fs)
{
	struct ll_attr a = { .fs = fs };
	return syscall(SYS_landlock_create_ruleset, &a, 8, 0);
}

static long add_rule(int rs, const char *path, unsigned long long allowed)
{
	int fd = open(path, O_PATH | O_CLOEXEC);
	struct ll_path p = { .allowed = allowed, .fd = fd };
	long r = syscall(SYS_landlock_add_rule, rs, 1, &p, 0);
	int e = errno;
	close(fd);
	errno = e;
	return r;
}

static long restrict_self(int rs)
{
	return syscall(SYS_landlock_restrict_self, rs, 0);
}

static void put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	if (fd < 0 || write(fd, text, strlen(text)) < 0)
		perror(path);
	close(fd);
}

static void copy_self(const char *path)
{
	char buf[65536];
	int in = open("/proc/self/exe", O_RDONLY);
	int out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	ssize_t n;
	while ((n = read(in, buf, sizeof buf)) > 0)
		if (write(out, buf, n) != n)
			perror("copy");
	close(in);
	close(out);
}

/* Runs `body` in a child (with no_new_privs set if `nnp`); returns its
 * status. */
static int in_child(void (*body)(void), int nnp)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		if (nnp)
			prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
		body();
		fflush(stdout);
		_exit(t_failures ? 1 : 0);
	}
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int run(const char *prog)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		char *argv[] = { (char *)prog, "probe", NULL };
		execv(prog, argv);
		_exit(errno == EACCES ? 13 : 99);
	}
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void errors(void)
{
	struct ll_attr a = { .fs = LL_READ_FILE };
	EXPECT_TRUE(syscall(SYS_landlock_create_ruleset, NULL, 0, 1) >= 7);
	/* The errata bitmask (whatever it holds). */
	EXPECT_TRUE(syscall(SYS_landlock_create_ruleset, NULL, 0, 2) >= 0);
	EXPECT_ERR(syscall(SYS_landlock_create_ruleset, &a, 8, 2), EINVAL);
	EXPECT_ERR(syscall(SYS_landlock_create_ruleset, &a, 8, 1), EINVAL);
	EXPECT_ERR(syscall(SYS_landlock_create_ruleset, NULL, 0, 1 << 7), EINVAL);
	EXPECT_ERR(syscall(SYS_landlock_create_ruleset, &a, 4, 0), EINVAL);
	EXPECT_ERR(syscall(SYS_landlock_create_ruleset, &a, 4097, 0), E2BIG);
	EXPECT_ERR(syscall(SYS_landlock_create_ruleset, BADPTR, 8, 0), EFAULT);
	EXPECT_ERR(create_ruleset(0), ENOMSG);
	EXPECT_ERR(create_ruleset(1ULL << 40), EINVAL);
	/* A longer struct is fine when its unknown tail is zero. */
	int big = syscall(SYS_landlock_create_ruleset, &a, sizeof a, 0);
	EXPECT_TRUE(big >= 0);
	EXPECT(fcntl(big, F_GETFD), FD_CLOEXEC);
	close(big);

	int rs = create_ruleset(LL_READ_FILE | LL_READ_DIR);
	int p[2];
	EXPECT_OK(pipe(p));
	struct ll_path r = { .allowed = LL_READ_FILE, .fd = open(base, O_PATH) };
	EXPECT_ERR(syscall(SYS_landlock_add_rule, rs, 1, &r, 1), EINVAL);
	EXPECT_ERR(syscall(SYS_landlock_add_rule, 999, 1, &r, 0), EBADF);
	EXPECT_ERR(syscall(SYS_landlock_add_rule, p[0], 1, &r, 0), EBADFD);
	EXPECT_ERR(syscall(SYS_landlock_add_rule, rs, 99, &r, 0), EINVAL);
	EXPECT_ERR(syscall(SYS_landlock_add_rule, rs, 1, BADPTR, 0), EFAULT);
	r.allowed = 0;
	EXPECT_ERR(syscall(SYS_landlock_add_rule, rs, 1, &r, 0), ENOMSG);
	r.allowed = LL_EXECUTE;
	EXPECT_ERR(syscall(SYS_landlock_add_rule, rs, 1, &r, 0), EINVAL);
	r.allowed = LL_READ_FILE;
	int dirfd = r.fd;
	r.fd = p[0];
	EXPECT_ERR(syscall(SYS_landlock_add_rule, rs, 1, &r, 0), EBADFD);
	r.fd = 999;
	EXPECT_ERR(syscall(SYS_landlock_add_rule, rs, 1, &r, 0), EBADF);
	/* A file takes file rights only. */
	EXPECT_ERR(add_rule(rs, at("ro/f"), LL_READ_DIR), EINVAL);
	EXPECT(add_rule(rs, at("ro/f"), LL_READ_FILE), 0);
	EXPECT(add_rule(rs, base, LL_READ_FILE | LL_READ_DIR), 0);
	EXPECT_ERR(restrict_self(999), EBADF);
	EXPECT_ERR(restrict_self(p[0]), EBADFD);
	close(dirfd);
	close(p[0]);
	close(p[1]);
	close(rs);
}

static void no_nnp(void)
{
	/* Without no_new_privs or CAP_SYS_ADMIN: refused. */
	int rs = create_ruleset(LL_READ_FILE);
	EXPECT_OK(setresgid(65534, 65534, 65534));
	EXPECT_OK(setresuid(65534, 65534, 65534));
	EXPECT_ERR(restrict_self(rs), EPERM);
	EXPECT_OK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
	EXPECT_ERR(syscall(SYS_landlock_restrict_self, rs, 1 << 7), EINVAL);
	EXPECT(restrict_self(rs), 0);
	/* ABI 7's audit flags; LOG_SUBDOMAINS_OFF alone needs no ruleset. */
	EXPECT(syscall(SYS_landlock_restrict_self, -1, 4), 0);
	EXPECT_ERR(syscall(SYS_landlock_restrict_self, -1, 1), EBADF);
	EXPECT(syscall(SYS_landlock_restrict_self, rs, 3), 0);
}

static void enforce(void)
{
	int rs = create_ruleset(LL_ALL);
	EXPECT(add_rule(rs, at("ro"), LL_READ_FILE | LL_READ_DIR | LL_EXECUTE), 0);
	EXPECT(add_rule(rs, at("rw"), LL_ALL), 0);
	EXPECT(restrict_self(rs), 0);
	close(rs);

	/* Opens. */
	int fd = open(at("ro/f"), O_RDONLY);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	EXPECT_ERR(open(at("ro/f"), O_WRONLY), EACCES);
	EXPECT_ERR(open(at("ro/f"), O_RDONLY | O_TRUNC), EACCES);
	fd = open(at("ro"), O_RDONLY | O_DIRECTORY);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	EXPECT_ERR(open(base, O_RDONLY | O_DIRECTORY), EACCES);
	EXPECT_ERR(open(at("other"), O_RDONLY | O_DIRECTORY), EACCES);
	EXPECT_ERR(open(at("other/g"), O_RDONLY), EACCES);
	EXPECT_ERR(open("/tmp", O_RDONLY), EACCES);
	/* Not restricted: stat, O_PATH. */
	struct stat st;
	EXPECT_OK(stat(at("other/g"), &st));
	fd = open(at("other/g"), O_PATH);
	EXPECT_TRUE(fd >= 0);
	close(fd);

	/* Make and remove. */
	EXPECT_ERR(mkdir(at("ro/d"), 0755), EACCES);
	EXPECT(mkdir(at("rw/d"), 0755), 0);
	fd = open(at("rw/d/f"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	EXPECT_TRUE(fd >= 0);
	EXPECT(write(fd, "abc", 3), 3);
	EXPECT(ftruncate(fd, 1), 0);
	close(fd);
	EXPECT_ERR(open(at("ro/new"), O_WRONLY | O_CREAT, 0644), EACCES);
	EXPECT_ERR(access(at("ro/new"), F_OK), ENOENT);
	EXPECT_ERR(unlink(at("ro/f")), EACCES);
	EXPECT_ERR(mkfifo(at("ro/fifo"), 0644), EACCES);
	EXPECT(mkfifo(at("rw/fifo"), 0644), 0);
	EXPECT_ERR(symlink("f", at("ro/l")), EACCES);
	EXPECT(symlink("f", at("rw/l")), 0);
	EXPECT(truncate(at("rw/d/f"), 0), 0);
	EXPECT_ERR(truncate(at("ro/f"), 0), EACCES);

	/* Renames and links: within a directory, into one without the right
	 * to make files (EACCES first), across with REFER on both sides, and
	 * from a directory without REFER (EXDEV). */
	EXPECT(rename(at("rw/old"), at("rw/new")), 0);
	EXPECT_ERR(rename(at("rw/new"), at("ro/new")), EACCES);
	EXPECT(rename(at("rw/new"), at("rw/d/new")), 0);
	EXPECT_ERR(link(at("ro/f"), at("rw/f2")), EXDEV);
	EXPECT(link(at("rw/d/new"), at("rw/new2")), 0);
	EXPECT(unlink(at("rw/new2")), 0);
	EXPECT_ERR(rename(at("ro/f"), at("rw/f")), EACCES);
	EXPECT_ERR(rmdir(at("rw/d")), ENOTEMPTY);

	/* A pathname socket is made in its directory. */
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(un.sun_path, sizeof un.sun_path, "%s", at("ro/sock"));
	EXPECT_ERR(bind(s, (struct sockaddr *)&un, sizeof un), EACCES);
	snprintf(un.sun_path, sizeof un.sun_path, "%s", at("rw/sock"));
	EXPECT(bind(s, (struct sockaddr *)&un, sizeof un), 0);
	close(s);

	/* No mount changes at all. */
	EXPECT_ERR(mount("none", at("rw/d"), "tmpfs", 0, NULL), EPERM);

	/* Exec: the program needs read and execute. */
	EXPECT(run(at("ro/prog")), 42);
	/* A child keeps the domain, and may be inspected (kcmp asks the
	 * ptrace check); the parent, outside the domain, may not. */
	fflush(stdout);
	int go[2];
	EXPECT_OK(pipe(go));
	pid_t pid = fork();
	if (pid == 0) {
		char c;
		close(go[1]);
		int denied = open(at("other/g"), O_RDONLY) < 0 && errno == EACCES;
		/* Alive until the parent has looked at it. */
		if (read(go[0], &c, 1) < 0)
			_exit(2);
		_exit(denied ? 0 : 1);
	}
	EXPECT_TRUE(syscall(SYS_kcmp, getpid(), pid, 1 /* KCMP_VM */, 0, 0) >= 0);
	EXPECT_ERR(syscall(SYS_kcmp, getpid(), getppid(), 1, 0, 0), EPERM);
	close(go[1]);
	int status;
	waitpid(pid, &status, 0);
	EXPECT(WEXITSTATUS(status), 0);
}

/* A TCP socket on 127.0.0.1: bound to `port` (0: any), listening if
 * `listening`; returns it, and its port in *got. */
static int tcp(int port, int listening, int *got)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (bind(s, (struct sockaddr *)&a, sizeof a) || (listening && listen(s, 4)))
		return -1;
	socklen_t n = sizeof a;
	getsockname(s, (struct sockaddr *)&a, &n);
	*got = ntohs(a.sin_port);
	return s;
}

static int port_in(int port, int want_connect)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int r = want_connect ? connect(s, (struct sockaddr *)&a, sizeof a)
			     : bind(s, (struct sockaddr *)&a, sizeof a);
	int e = errno;
	close(s);
	errno = e;
	return r;
}

static void network(void)
{
	/* Listeners made before the domain: one the rules name, one not. */
	int open_port, shut_port, free_port, other_port;
	int l1 = tcp(0, 1, &open_port), l2 = tcp(0, 1, &shut_port);
	close(tcp(0, 0, &free_port));
	close(tcp(0, 0, &other_port));
	EXPECT_TRUE(l1 >= 0 && l2 >= 0);
	struct ll_attr a = { .net = LL_BIND_TCP | LL_CONNECT_TCP };
	int rs = syscall(SYS_landlock_create_ruleset, &a, 16, 0);
	EXPECT_TRUE(rs >= 0);
	struct ll_port r = { .allowed = LL_CONNECT_TCP, .port = open_port };
	EXPECT(syscall(SYS_landlock_add_rule, rs, 2, &r, 0), 0);
	r = (struct ll_port){ .allowed = LL_BIND_TCP, .port = free_port };
	EXPECT(syscall(SYS_landlock_add_rule, rs, 2, &r, 0), 0);
	r.port = 65536;
	EXPECT_ERR(syscall(SYS_landlock_add_rule, rs, 2, &r, 0), EINVAL);
	r = (struct ll_port){ .allowed = 0, .port = 80 };
	EXPECT_ERR(syscall(SYS_landlock_add_rule, rs, 2, &r, 0), ENOMSG);
	r.allowed = 1 << 5;
	EXPECT_ERR(syscall(SYS_landlock_add_rule, rs, 2, &r, 0), EINVAL);
	/* No file rights handled: a path rule does not fit. */
	EXPECT_ERR(add_rule(rs, base, LL_READ_FILE), EINVAL);
	EXPECT(restrict_self(rs), 0);

	EXPECT(port_in(open_port, 1), 0);
	EXPECT_ERR(port_in(shut_port, 1), EACCES);
	EXPECT(port_in(free_port, 0), 0);
	EXPECT_ERR(port_in(other_port, 0), EACCES);
	/* UDP is not TCP: not restricted. */
	int u = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in ua = { .sin_family = AF_INET, .sin_port = htons(other_port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	EXPECT(bind(u, (struct sockaddr *)&ua, sizeof ua), 0);
	close(u);
	/* Files are left alone, renames across directories too. */
	int fd = open(at("other/g"), O_RDONLY);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	EXPECT(rename(at("other/g"), at("rw/g")), 0);
	EXPECT(rename(at("rw/g"), at("other/g")), 0);
	close(l1);
	close(l2);
}

static int early = -1;
static pid_t outsider;

/* An abstract Unix stream socket named `tag` (with this process's pid),
 * listening; or, with `dial`, a connection attempt to one. */
static int abstract(const char *tag, pid_t pid, int dial)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "ll-%d-%s", (int)pid, tag);
	socklen_t len = offsetof(struct sockaddr_un, sun_path) + 1 + n;
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	if (dial) {
		int r = connect(s, (struct sockaddr *)&a, len);
		int e = errno;
		close(s);
		errno = e;
		return r;
	}
	if (bind(s, (struct sockaddr *)&a, len) || listen(s, 4))
		return -1;
	return s;
}

static long restrict_scoped(void)
{
	struct ll_attr a = { .scoped = 3 };
	int rs = syscall(SYS_landlock_create_ruleset, &a, 24, 0);
	long r = restrict_self(rs);
	close(rs);
	return r;
}

static void scopes(void)
{
	struct ll_attr bad = { .scoped = 1 << 5 };
	EXPECT_ERR(syscall(SYS_landlock_create_ruleset, &bad, 24, 0), EINVAL);
	EXPECT(restrict_scoped(), 0);
	/* Signals: not out of the domain, even as root; within it, yes. */
	EXPECT_ERR(kill(outsider, 0), EPERM);
	EXPECT_ERR(kill(getppid(), 0), EPERM);
	EXPECT(kill(getpid(), 0), 0);
	/* Abstract sockets: not one made outside; one made inside, yes. */
	EXPECT_ERR(abstract("out", getppid(), 1), EPERM);
	int mine = abstract("in", getpid(), 0);
	EXPECT_TRUE(mine >= 0);
	EXPECT(abstract("in", getpid(), 1), 0);
	int go[2];
	EXPECT_OK(pipe(go));
	fflush(stdout);
	pid_t kid = fork();
	if (kid == 0) {
		/* The same domain: the parent's socket and the parent. */
		close(go[1]);
		int ok = abstract("in", getppid(), 1) == 0 && kill(getppid(), 0) == 0;
		/* A nested scoped domain: the parent's socket is outside it. */
		ok = ok && restrict_scoped() == 0;
		ok = ok && abstract("in", getppid(), 1) < 0 && errno == EPERM;
		ok = ok && kill(getppid(), 0) < 0 && errno == EPERM;
		int nested = abstract("nested", getpid(), 0);
		char c;
		/* Held open until the parent has tried it. */
		ssize_t r = nested >= 0 ? read(go[0], &c, 1) : -1;
		(void)r;
		_exit(ok ? 0 : 1);
	}
	close(go[0]);
	/* From the outer domain into the nested one: allowed. */
	int tries = 0;
	while (abstract("nested", kid, 1) < 0 && errno == ECONNREFUSED && tries++ < 200)
		usleep(5000);
	EXPECT(abstract("nested", kid, 1), 0);
	EXPECT(kill(kid, 0), 0);
	close(go[1]);
	int st;
	waitpid(kid, &st, 0);
	EXPECT(WEXITSTATUS(st), 0);
	close(mine);
}

static void ioctls(void)
{
	int rs = create_ruleset(LL_READ_FILE | LL_WRITE_FILE | LL_IOCTL_DEV);
	EXPECT(add_rule(rs, "/dev/null", LL_READ_FILE | LL_WRITE_FILE), 0);
	EXPECT(add_rule(rs, "/dev/zero", LL_READ_FILE | LL_WRITE_FILE | LL_IOCTL_DEV), 0);
	EXPECT(add_rule(rs, at("ro"), LL_READ_FILE | LL_IOCTL_DEV), 0);
	EXPECT(restrict_self(rs), 0);
	struct termios tio;
	int null = open("/dev/null", O_RDWR), zero = open("/dev/zero", O_RDONLY);
	EXPECT_TRUE(null >= 0 && zero >= 0);
	EXPECT_ERR(ioctl(null, TCGETS, &tio), EACCES);
	EXPECT_ERR(ioctl(zero, TCGETS, &tio), ENOTTY);
	/* Opened before the domain: not restricted. */
	EXPECT_ERR(ioctl(early, TCGETS, &tio), ENOTTY);
	/* About the descriptor, not the device: allowed. */
	int one = 1;
	EXPECT(ioctl(null, FIONBIO, &one), 0);
	EXPECT(ioctl(null, FIOCLEX), 0);
	EXPECT(fcntl(null, F_GETFD), FD_CLOEXEC);
	EXPECT(ioctl(null, FIONCLEX), 0);
	/* Not a device: not restricted. */
	int f = open(at("ro/f"), O_RDONLY), n = -1;
	EXPECT(ioctl(f, FIONREAD, &n), 0);
	EXPECT(n, 5);
	close(f);
	close(null);
	close(zero);
}

static void exec_only(void)
{
	/* Execute without read is not enough: the file is opened to read. */
	int rs = create_ruleset(LL_EXECUTE | LL_READ_FILE);
	EXPECT(add_rule(rs, at("ro"), LL_EXECUTE), 0);
	EXPECT(restrict_self(rs), 0);
	EXPECT(run(at("ro/prog")), 13);
}

static int before = -1;

static void truncation(void)
{
	int rs = create_ruleset(LL_WRITE_FILE | LL_READ_FILE | LL_TRUNCATE);
	EXPECT(add_rule(rs, at("rw"), LL_WRITE_FILE | LL_READ_FILE), 0);
	EXPECT(restrict_self(rs), 0);
	EXPECT_ERR(open(at("rw/t"), O_WRONLY | O_TRUNC), EACCES);
	int fd = open(at("rw/t"), O_WRONLY);
	EXPECT_TRUE(fd >= 0);
	EXPECT_ERR(ftruncate(fd, 0), EACCES);
	EXPECT_ERR(truncate(at("rw/t"), 0), EACCES);
	close(fd);
	/* Opened before: not restricted. */
	EXPECT(ftruncate(before, 1), 0);
}

static void one_file(void)
{
	int rs = create_ruleset(LL_READ_FILE);
	EXPECT(add_rule(rs, at("ro/f"), LL_READ_FILE), 0);
	EXPECT(restrict_self(rs), 0);
	int fd = open(at("ro/f"), O_RDONLY);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	EXPECT_ERR(open(at("ro/g"), O_RDONLY), EACCES);
	/* Directories are not handled here: listing works. */
	fd = open(at("ro"), O_RDONLY | O_DIRECTORY);
	EXPECT_TRUE(fd >= 0);
	close(fd);
}

static void layers(void)
{
	/* Each layer must allow: the first everything under base, the
	 * second only ro. */
	int a = create_ruleset(LL_READ_FILE);
	EXPECT(add_rule(a, base, LL_READ_FILE), 0);
	EXPECT(restrict_self(a), 0);
	int fd = open(at("rw/t"), O_RDONLY);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	int b = create_ruleset(LL_READ_FILE);
	EXPECT(add_rule(b, at("ro"), LL_READ_FILE), 0);
	EXPECT(restrict_self(b), 0);
	EXPECT_ERR(open(at("rw/t"), O_RDONLY), EACCES);
	fd = open(at("ro/g"), O_RDONLY);
	EXPECT_TRUE(fd >= 0);
	close(fd);
	/* A rule added after restrict_self changes nothing enforced. */
	EXPECT(add_rule(b, at("rw"), LL_READ_FILE), 0);
	EXPECT_ERR(open(at("rw/t"), O_RDONLY), EACCES);
	/* Sixteen layers at most. */
	int i, r = 0;
	for (i = 0; i < 20 && r == 0; i++)
		r = restrict_self(b);
	EXPECT_TRUE(r < 0 && errno == E2BIG && i == 15);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "probe") == 0)
		return 42;
	strcpy(base, "/tmp/landlock.XXXXXX");
	if (!mkdtemp(base)) {
		perror("mkdtemp");
		return 125;
	}
	mkdir(at("ro"), 0755);
	mkdir(at("rw"), 0755);
	mkdir(at("other"), 0755);
	put(at("ro/f"), "hello");
	put(at("ro/g"), "world");
	put(at("other/g"), "other");
	put(at("rw/old"), "old");
	put(at("rw/t"), "truncate me");
	copy_self(at("ro/prog"));

	errors();
	EXPECT(in_child(no_nnp, 0), 0);
	EXPECT(in_child(enforce, 1), 0);
	EXPECT(in_child(exec_only, 1), 0);
	before = open(at("rw/t"), O_WRONLY);
	EXPECT(in_child(truncation, 1), 0);
	close(before);
	EXPECT(in_child(one_file, 1), 0);
	/* From outside a domain, a thread in one can be inspected. */
	fflush(stdout);
	pid_t held = fork();
	if (held == 0) {
		prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
		restrict_self(create_ruleset(LL_READ_FILE));
		pause();
		_exit(0);
	}
	usleep(100000);
	EXPECT_TRUE(syscall(SYS_kcmp, getpid(), held, 1, 0, 0) >= 0);
	kill(held, SIGKILL);
	waitpid(held, NULL, 0);
	EXPECT(in_child(layers, 1), 0);
	EXPECT(in_child(network, 1), 0);
	early = open("/dev/null", O_RDWR);
	EXPECT(in_child(ioctls, 1), 0);
	close(early);
	fflush(stdout);
	outsider = fork();
	if (outsider == 0) {
		pause();
		_exit(0);
	}
	int out = abstract("out", getpid(), 0);
	EXPECT_TRUE(out >= 0);
	EXPECT(in_child(scopes, 1), 0);
	close(out);
	kill(outsider, SIGKILL);
	waitpid(outsider, NULL, 0);

	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", base);
	if (system(cmd) != 0)
		perror("rm");
	return t_done();
}
