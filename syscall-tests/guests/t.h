/*
 * t.h - helpers shared by the differential guest programs.
 *
 * Every line a guest prints must be identical in two correct runs (native and
 * sandboxed): so results are printed as return values and errno *names*, and
 * anything that legitimately differs between runs (addresses, pids, inode
 * numbers, times) is reduced to a yes/no fact before it is printed.
 *
 * The EXPECT_* macros also compare against what Linux is known to answer and
 * count mismatches; t_done() turns the count into the exit status. Natively a
 * guest must exit 0, which keeps the tests honest: a guest that fails natively
 * is a wrong test, not a sandbox bug.
 */
#ifndef T_H
#define T_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* Fixture tree made by build.rs; FIXTURES is passed with -D. */
#ifndef FIXTURES
#error "FIXTURES must be defined by the build script"
#endif
#define FIX(rel) FIXTURES "/" rel

/* An address no guest maps: page 0 plus one byte. Laundered through a
 * volatile so the compiler does not reject the deliberate misuse. */
static void *volatile t_badptr = (void *)1;
#define BADPTR ((void *)t_badptr)

static int t_failures;
#define T_UNUSED __attribute__((unused))

T_UNUSED static const char *errname(int e)
{
	static char other[32];
#define E_(x) case x: return #x;
	switch (e) {
	case 0: return "0";
	E_(EPERM) E_(ENOENT) E_(ESRCH) E_(EINTR) E_(EIO) E_(ENXIO) E_(E2BIG)
	E_(ENOEXEC) E_(EBADF) E_(ECHILD) E_(EAGAIN) E_(ENOMEM) E_(EACCES)
	E_(EFAULT) E_(ENOTBLK) E_(EBUSY) E_(EEXIST) E_(EXDEV) E_(ENODEV)
	E_(ENOTDIR) E_(EISDIR) E_(EINVAL) E_(ENFILE) E_(EMFILE) E_(ENOTTY)
	E_(ETXTBSY) E_(EFBIG) E_(ENOSPC) E_(ESPIPE) E_(EROFS) E_(EMLINK)
	E_(EPIPE) E_(EDOM) E_(ERANGE) E_(EDEADLK) E_(ENAMETOOLONG) E_(ENOLCK)
	E_(ENOSYS) E_(ENOTEMPTY) E_(ELOOP) E_(ENOMSG) E_(EIDRM) E_(ENODATA)
	E_(ETIME) E_(EOVERFLOW) E_(EILSEQ) E_(ENOTSOCK) E_(EDESTADDRREQ)
	E_(EMSGSIZE) E_(EPROTOTYPE) E_(ENOPROTOOPT) E_(EPROTONOSUPPORT)
	E_(EOPNOTSUPP) E_(EAFNOSUPPORT) E_(EADDRINUSE) E_(EADDRNOTAVAIL)
	E_(ENETDOWN) E_(ENETUNREACH) E_(ECONNABORTED) E_(ECONNRESET)
	E_(ENOBUFS) E_(EISCONN) E_(ENOTCONN) E_(ETIMEDOUT) E_(ECONNREFUSED)
	E_(EHOSTUNREACH) E_(EALREADY) E_(EINPROGRESS) E_(ESTALE) E_(EDQUOT)
	E_(ECANCELED) E_(EOWNERDEAD) E_(ENOTRECOVERABLE) E_(ELIBBAD)
	E_(ENOKEY) E_(EKEYREVOKED) E_(EKEYEXPIRED) E_(EKEYREJECTED) E_(EBADFD)
	}
#undef E_
	snprintf(other, sizeof other, "E#%d", e);
	return other;
}

/* Output goes to a pipe in both runs; line buffering keeps the order of
 * lines stable even when a guest dies from a signal half-way. */
__attribute__((constructor)) static void t_init(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
}

T_UNUSED static void t_line(const char *name, long ret, int err)
{
	if (ret == -1)
		printf("%s: ret=-1 errno=%s\n", name, errname(err));
	else
		printf("%s: ret=%ld\n", name, ret);
}

T_UNUSED static void t_fail(const char *what)
{
	t_failures++;
	printf("  ^ MISMATCH (expected %s)\n", what);
}

/* Print the exact return value (use only where it is deterministic). */
#define CHECK(expr) ({ errno = 0; long r_ = (long)(expr); int e_ = errno; \
	t_line(#expr, r_, e_); errno = e_; r_; })

/* Expect an exact return value. */
#define EXPECT(expr, want) ({ errno = 0; long r_ = (long)(expr); int e_ = errno; \
	t_line(#expr, r_, e_); if (r_ != (long)(want)) { t_fail(#want); } \
	errno = e_; r_; })

/* Expect failure with -1 and the given errno. */
#define EXPECT_ERR(expr, eno) ({ errno = 0; long r_ = (long)(expr); int e_ = errno; \
	t_line(#expr, r_, e_); if (r_ != -1 || e_ != (eno)) { t_fail(#eno); } \
	errno = e_; r_; })

/* Expect success (ret >= 0) without printing the value: fds whose number is
 * deterministic should use EXPECT instead. */
#define EXPECT_OK(expr) ({ errno = 0; long r_ = (long)(expr); int e_ = errno; \
	if (r_ < 0) printf("%s: ret=-1 errno=%s\n", #expr, errname(e_)); \
	else printf("%s: ok\n", #expr); \
	if (r_ < 0) { t_fail("success"); } \
	errno = e_; r_; })

/* Functions returning an errno value (pthread style, clock_nanosleep). */
#define EXPECT_RC(expr, want) ({ int r_ = (int)(expr); \
	printf("%s: rc=%s\n", #expr, errname(r_)); \
	if (r_ != (want)) { t_fail(#want); } \
	r_; })

/* A fact about the run, printed as yes/no. */
#define EXPECT_TRUE(cond) ({ int c_ = !!(cond); \
	printf("%s: %s\n", #cond, c_ ? "yes" : "no"); \
	if (!c_) { t_fail("yes"); } \
	c_; })

/* mmap-like calls: only MAP_FAILED vs. a mapping is printed. */
#define EXPECT_MAP(expr) ({ errno = 0; void *p_ = (void *)(expr); int e_ = errno; \
	if (p_ == MAP_FAILED) { printf("%s: MAP_FAILED errno=%s\n", #expr, errname(e_)); \
		t_fail("a mapping"); } \
	else { printf("%s: mapped\n", #expr); } \
	errno = e_; p_; })
#define EXPECT_MAP_ERR(expr, eno) ({ errno = 0; void *p_ = (void *)(expr); int e_ = errno; \
	if (p_ == MAP_FAILED) printf("%s: MAP_FAILED errno=%s\n", #expr, errname(e_)); \
	else printf("%s: mapped\n", #expr); \
	if (p_ != MAP_FAILED || e_ != (eno)) { t_fail(#eno); } \
	errno = e_; p_; })

/* Print a string result (deterministic content only). */
#define SHOW(fmt, ...) printf(fmt "\n", ##__VA_ARGS__)

/* Runs the rest of the guest in a child process; the parent exits with the
 * child's status as a shell reports it (128+N after signal N). For guests
 * that must die of a signal they send themselves: under `ferrovisor do` the
 * guest is the sandbox's init, which drops the signals it does not handle
 * when they come from inside its PID namespace (pid_namespaces(7)), so the
 * default action is checked in an ordinary process, as it runs natively. */
T_UNUSED static void t_as_child(void)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(125);
	}
	if (pid == 0)
		return;
	int st;
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR)
			exit(125);
	}
	exit(WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st));
}

T_UNUSED static int t_done(void)
{
	printf("failures=%d\n", t_failures);
	fflush(stdout);
	return t_failures ? 1 : 0;
}

/* Guests that try to modify the root call this first: natively the harness
 * runs them with / remounted read-only, and run any other way they would
 * really rename and delete the fixtures. So refuse unless the fixture tree
 * is read-only. Exit status 2, which no harness expectation uses. */
T_UNUSED static void t_require_readonly(void)
{
	if (access(FIXTURES, W_OK) == 0 || errno != EROFS) {
		printf("refusing to run: %s is writable (run through the harness)\n", FIXTURES);
		fflush(stdout);
		_exit(2);
	}
}

/* Read a whole file into buf (NUL-terminated); returns length or -1. */
T_UNUSED static long t_slurp(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, cap - 1 - n);
		if (r < 0) {
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n == cap - 1)
			break;
	}
	buf[n] = 0;
	close(fd);
	return (long)n;
}

/* Opens a pseudo-terminal pair without making either the controlling
 * terminal; exits 125 (the test cannot run) when there is none. */
static inline void open_pty(int *master, int *slave)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY);
	if (m < 0 || grantpt(m) || unlockpt(m))
		exit(125);
	int s = open(ptsname(m), O_RDWR | O_NOCTTY);
	if (s < 0)
		exit(125);
	*master = m;
	*slave = s;
}

#endif
