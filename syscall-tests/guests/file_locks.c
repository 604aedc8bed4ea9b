/* Advisory file locks between processes: flock(2), fcntl POSIX record locks
 * and open-file-description locks. */
#include "t.h"
#include <poll.h>
#include <sys/file.h>
#include <sys/time.h>
#include <sys/wait.h>

static char path[] = "/tmp/file_locks.XXXXXX";

static int setlk(int fd, int cmd, short type, off_t start, off_t len)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len };
	return fcntl(fd, cmd, &fl);
}

/* F_GETLK for a range: prints what is reported (no pids). */
static void getlk(int fd, int cmd, short type, off_t start, off_t len, pid_t want_pid)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len };
	if (fcntl(fd, cmd, &fl) != 0) {
		printf("getlk: errno=%s\n", errname(errno));
		t_fail("success");
		return;
	}
	if (fl.l_type == F_UNLCK) {
		SHOW("getlk [%ld,+%ld]: unlocked", (long)start, (long)len);
		return;
	}
	SHOW("getlk [%ld,+%ld]: %s start=%ld len=%ld whence=%d", (long)start, (long)len,
	     fl.l_type == F_WRLCK ? "F_WRLCK" : "F_RDLCK", (long)fl.l_start, (long)fl.l_len,
	     fl.l_whence);
	EXPECT_TRUE(fl.l_pid == want_pid);
}

/* Runs fn in a child and waits; the child's exit status is its failures. */
static void in_child(void (*fn)(void))
{
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		fn();
		fflush(stdout);
		_exit(t_failures ? 1 : 0);
	}
	int st = 0;
	waitpid(c, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		t_fail("child passed");
}

static void child_flock_busy(void)
{
	int fd = open(path, O_RDWR);
	EXPECT_ERR(flock(fd, LOCK_EX | LOCK_NB), EWOULDBLOCK);
	EXPECT_ERR(flock(fd, LOCK_SH | LOCK_NB), EWOULDBLOCK);
	close(fd);
}

static void child_flock_shared(void)
{
	int fd = open(path, O_RDONLY);
	EXPECT(flock(fd, LOCK_SH | LOCK_NB), 0);
	EXPECT_ERR(flock(fd, LOCK_EX | LOCK_NB), EWOULDBLOCK);
	close(fd);
}

static void child_flock_free(void)
{
	int fd = open(path, O_RDWR);
	EXPECT(flock(fd, LOCK_EX | LOCK_NB), 0);
	close(fd);
}

static pid_t parent_pid;

static void child_ranges(void)
{
	int fd = open(path, O_RDWR);
	EXPECT(setlk(fd, F_SETLK, F_WRLCK, 0, 10), 0);
	EXPECT_ERR(setlk(fd, F_SETLK, F_WRLCK, 15, 1), EAGAIN);
	EXPECT_ERR(setlk(fd, F_SETLK, F_RDLCK, 19, 5), EAGAIN);
	EXPECT(setlk(fd, F_SETLK, F_RDLCK, 30, 10), 0);
	EXPECT_ERR(setlk(fd, F_SETLK, F_WRLCK, 35, 1), EAGAIN);
	EXPECT(setlk(fd, F_SETLK, F_WRLCK, 40, 0), 0);
	getlk(fd, F_GETLK, F_WRLCK, 12, 2, parent_pid);
	getlk(fd, F_GETLK, F_RDLCK, 12, 2, parent_pid);
	getlk(fd, F_GETLK, F_WRLCK, 31, 1, parent_pid);
	getlk(fd, F_GETLK, F_RDLCK, 31, 1, parent_pid);
	close(fd);
}

static void child_after_split(void)
{
	int fd = open(path, O_RDWR);
	/* The parent unlocked [12,14) out of [10,20) and merged [20,30). */
	EXPECT(setlk(fd, F_SETLK, F_WRLCK, 12, 2), 0);
	getlk(fd, F_GETLK, F_WRLCK, 11, 1, parent_pid);
	getlk(fd, F_GETLK, F_WRLCK, 25, 1, parent_pid);
	EXPECT_ERR(setlk(fd, F_SETLK, F_WRLCK, 29, 1), EAGAIN);
	close(fd);
}

static void child_all_free(void)
{
	int fd = open(path, O_RDWR);
	getlk(fd, F_GETLK, F_WRLCK, 0, 0, 0);
	EXPECT(setlk(fd, F_SETLK, F_WRLCK, 0, 0), 0);
	close(fd);
}

static void on_alarm(int sig)
{
	(void)sig;
}

static void child_interrupted(void)
{
	struct sigaction sa = { .sa_handler = on_alarm };
	sigaction(SIGALRM, &sa, NULL);
	int fd = open(path, O_RDWR);
	struct itimerval it = { .it_value = { .tv_usec = 100000 } };
	setitimer(ITIMER_REAL, &it, NULL);
	EXPECT_ERR(setlk(fd, F_SETLKW, F_WRLCK, 0, 1), EINTR);
	setitimer(ITIMER_REAL, &it, NULL);
	EXPECT_ERR(flock(fd, LOCK_EX), EINTR);
	close(fd);
}

int main(void)
{
	int fd = mkstemp(path);
	EXPECT_TRUE(fd >= 0);
	EXPECT(write(fd, "0123456789abcdef", 16), 16);
	parent_pid = getpid();

	/* flock: exclusive against another open file description. */
	EXPECT(flock(fd, LOCK_EX), 0);
	EXPECT(flock(fd, LOCK_EX | LOCK_NB), 0);
	in_child(child_flock_busy);
	/* Shared locks coexist; a shared lock blocks exclusive ones. */
	EXPECT(flock(fd, LOCK_SH), 0);
	in_child(child_flock_shared);
	EXPECT(flock(fd, LOCK_UN), 0);
	in_child(child_flock_free);
	/* The lock belongs to the description: a dup shares it, and it goes
	 * with the last close. */
	int fd2 = open(path, O_RDWR);
	EXPECT(flock(fd2, LOCK_EX), 0);
	int fd3 = dup(fd2);
	EXPECT(close(fd2), 0);
	in_child(child_flock_busy);
	EXPECT_ERR(flock(fd, LOCK_EX | LOCK_NB), EWOULDBLOCK);
	EXPECT(close(fd3), 0);
	in_child(child_flock_free);
	EXPECT_ERR(flock(fd, 0), EINVAL);
	EXPECT_ERR(flock(99, LOCK_SH), EBADF);

	/* POSIX record locks between processes. */
	EXPECT(setlk(fd, F_SETLK, F_WRLCK, 10, 10), 0);
	EXPECT(setlk(fd, F_SETLK, F_RDLCK, 30, 10), 0);
	/* A process's own locks never conflict. */
	EXPECT(setlk(fd, F_SETLK, F_WRLCK, 30, 5), 0);
	EXPECT(setlk(fd, F_SETLK, F_RDLCK, 30, 5), 0);
	getlk(fd, F_GETLK, F_WRLCK, 0, 0, 0);
	in_child(child_ranges);
	/* Splitting and merging. */
	EXPECT(setlk(fd, F_SETLK, F_UNLCK, 12, 2), 0);
	EXPECT(setlk(fd, F_SETLK, F_WRLCK, 20, 10), 0);
	in_child(child_after_split);
	/* Closing any descriptor of the file drops the process's locks. */
	int other = open(path, O_RDONLY);
	EXPECT(close(other), 0);
	in_child(child_all_free);

	/* Bad input. */
	int ro = open(path, O_RDONLY);
	EXPECT_ERR(setlk(ro, F_SETLK, F_WRLCK, 0, 1), EBADF);
	EXPECT(setlk(ro, F_SETLK, F_RDLCK, 0, 1), 0);
	EXPECT_ERR(setlk(fd, F_SETLK, 7, 0, 1), EINVAL);
	EXPECT_ERR(setlk(fd, F_GETLK, F_UNLCK, 0, 1), EINVAL);
	struct flock bad = { .l_type = F_RDLCK, .l_whence = 9 };
	EXPECT_ERR(fcntl(fd, F_SETLK, &bad), EINVAL);
	EXPECT_ERR(fcntl(fd, F_SETLK, BADPTR), EFAULT);
	EXPECT_ERR(fcntl(fd, F_GETLK, BADPTR), EFAULT);
	EXPECT_ERR(setlk(fd, F_SETLK, F_RDLCK, -5, 1), EINVAL);
	EXPECT(close(ro), 0);

	/* OFD locks: owned by the description, so two opens conflict even in
	 * one process. */
	int a = open(path, O_RDWR);
	int b = open(path, O_RDWR);
	EXPECT(setlk(a, F_OFD_SETLK, F_WRLCK, 0, 4), 0);
	EXPECT_ERR(setlk(b, F_OFD_SETLK, F_RDLCK, 2, 4), EAGAIN);
	getlk(b, F_OFD_GETLK, F_RDLCK, 2, 4, -1);
	/* A classic lock of the same process conflicts with it too. */
	EXPECT_ERR(setlk(fd, F_SETLK, F_WRLCK, 3, 1), EAGAIN);
	struct flock withpid = { .l_type = F_RDLCK, .l_whence = SEEK_SET, .l_pid = 1 };
	EXPECT_ERR(fcntl(b, F_OFD_SETLK, &withpid), EINVAL);
	EXPECT(close(a), 0);
	EXPECT(setlk(b, F_OFD_SETLK, F_RDLCK, 2, 4), 0);
	EXPECT(close(b), 0);

	/* A blocked F_SETLKW wakes when the holder unlocks. */
	EXPECT(setlk(fd, F_SETLK, F_WRLCK, 0, 0), 0);
	int p[2];
	EXPECT(pipe(p), 0);
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		close(p[0]);
		int cfd = open(path, O_RDWR);
		int r = setlk(cfd, F_SETLKW, F_WRLCK, 5, 1);
		char ch = r == 0 ? 'y' : 'n';
		write(p[1], &ch, 1);
		_exit(0);
	}
	close(p[1]);
	usleep(100000);
	struct pollfd pfd = { .fd = p[0], .events = POLLIN };
	EXPECT(poll(&pfd, 1, 0), 0);
	EXPECT(setlk(fd, F_SETLK, F_UNLCK, 0, 0), 0);
	char ch = 0;
	EXPECT(read(p[0], &ch, 1), 1);
	EXPECT(ch, 'y');
	int st;
	EXPECT_TRUE(waitpid(c, &st, 0) == c);
	close(p[0]);

	/* Blocking waits are interrupted by signals. */
	EXPECT(setlk(fd, F_SETLK, F_WRLCK, 0, 1), 0);
	EXPECT(flock(fd, LOCK_EX), 0);
	in_child(child_interrupted);

	EXPECT(unlink(path), 0);
	EXPECT(close(fd), 0);
	return t_done();
}
