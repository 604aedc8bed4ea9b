/* /dev/fd/N, /dev/stdin, /dev/stdout and /dev/stderr (issue 4 point 3):
 * the links and where they lead, and what opening them gives. Opening
 * /dev/fd/N of a file opens the file anew (a description of its own, with
 * its own offset and mode, fd(4)); of a pipe, the same pipe. */
#include "t.h"
#include <dirent.h>

static void show_link(const char *path)
{
	char buf[256];
	ssize_t n = readlink(path, buf, sizeof buf);
	if (n < 0)
		SHOW("readlink %s: errno=%s", path, errname(errno));
	else
		SHOW("readlink %s -> %.*s", path, (int)n, buf);
}

static int same_file(int a, int b)
{
	struct stat x, y;
	return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_dev == y.st_dev &&
	       x.st_ino == y.st_ino && x.st_mode == y.st_mode && x.st_rdev == y.st_rdev;
}

int main(void)
{
	char path[64], buf[64];
	struct stat st;

	/* The links, as Linux's /dev has them (udev, or a container's
	 * runtime). */
	show_link("/dev/fd");
	show_link("/dev/stdin");
	show_link("/dev/stdout");
	show_link("/dev/stderr");
	EXPECT(lstat("/dev/fd", &st), 0);
	EXPECT_TRUE(S_ISLNK(st.st_mode));
	EXPECT(stat("/dev/fd", &st), 0);
	EXPECT_TRUE(S_ISDIR(st.st_mode));

	/* A file opened anew: its own offset, the file's start. */
	int fd = EXPECT(open(FIX("file.txt"), O_RDONLY), 3);
	EXPECT(read(fd, buf, 6), 6);
	snprintf(path, sizeof path, "/dev/fd/%d", fd);
	int re = EXPECT(open(path, O_RDONLY), 4);
	EXPECT_TRUE(same_file(fd, re));
	EXPECT(lseek(re, 0, SEEK_CUR), 0);
	EXPECT(read(re, buf, 5), 5);
	SHOW("read through /dev/fd: %.5s", buf);
	EXPECT(lseek(fd, 0, SEEK_CUR), 6);
	EXPECT(read(fd, buf, 7), 7);
	SHOW("read through the original: %.7s", buf);
	/* Its own status flags too. */
	int re2 = EXPECT(open(path, O_RDONLY | O_NONBLOCK), 5);
	EXPECT_TRUE((fcntl(re2, F_GETFL) & O_NONBLOCK) != 0);
	EXPECT_TRUE((fcntl(fd, F_GETFL) & O_NONBLOCK) == 0);
	EXPECT(close(re2), 0);
	/* The same file through /proc/self/fd. */
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	re2 = EXPECT(open(path, O_RDONLY), 5);
	EXPECT_TRUE(same_file(fd, re2));
	EXPECT(lseek(re2, 0, SEEK_CUR), 0);
	EXPECT(close(re2), 0);
	/* Closing the original leaves the new one working. */
	EXPECT(close(fd), 0);
	EXPECT(pread(re, buf, 5, 6), 5);
	SHOW("after closing the original: %.5s", buf);
	EXPECT(close(re), 0);
	/* A closed or never-opened descriptor is not there. */
	EXPECT_ERR(open("/dev/fd/3", O_RDONLY), ENOENT);
	EXPECT_ERR(open("/dev/fd/99", O_RDONLY), ENOENT);
	EXPECT_ERR(open("/dev/fd/x", O_RDONLY), ENOENT);

	/* A directory, opened anew as one. */
	int dfd = EXPECT(open(FIX("dir"), O_RDONLY | O_DIRECTORY), 3);
	snprintf(path, sizeof path, "/dev/fd/%d", dfd);
	int dre = EXPECT(open(path, O_RDONLY | O_DIRECTORY), 4);
	EXPECT_TRUE(same_file(dfd, dre));
	EXPECT(faccessat(dre, "a", R_OK, 0), 0);
	snprintf(path, sizeof path, "/dev/fd/%d/b", dfd);
	int b = EXPECT(open(path, O_RDONLY), 5);
	EXPECT(read(b, buf, sizeof buf), 3);
	EXPECT(close(b), 0);
	EXPECT(close(dre), 0);

	/* /dev/fd lists the open descriptors: 0, 1, 2, the directory, and
	 * the one reading the list. */
	DIR *d = opendir("/dev/fd");
	int n = 0, saw_dfd = 0;
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		n++;
		saw_dfd |= atoi(e->d_name) == dfd;
	}
	EXPECT_TRUE(d != NULL);
	EXPECT(n, 5);
	EXPECT_TRUE(saw_dfd);
	closedir(d);
	EXPECT(close(dfd), 0);

	/* A pipe: the same pipe, in the direction asked for. */
	int p[2];
	EXPECT(pipe(p), 0);
	snprintf(path, sizeof path, "/dev/fd/%d", p[1]);
	int w = EXPECT(open(path, O_WRONLY), 5);
	EXPECT(write(w, "through /dev/fd", 15), 15);
	EXPECT(close(w), 0);
	EXPECT(close(p[1]), 0);
	EXPECT(read(p[0], buf, sizeof buf), 15);
	SHOW("pipe got: %.15s", buf);
	/* Every writer closed: end of file. */
	EXPECT(read(p[0], buf, sizeof buf), 0);
	EXPECT(close(p[0]), 0);

	/* /dev/stdin is the harness's /dev/null. */
	int in = EXPECT(open("/dev/stdin", O_RDONLY), 3);
	EXPECT_TRUE(same_file(in, 0));
	EXPECT(fstat(in, &st), 0);
	EXPECT_TRUE(S_ISCHR(st.st_mode));
	EXPECT(read(in, buf, sizeof buf), 0);
	EXPECT(close(in), 0);

	/* /dev/stdout and /dev/stderr are the pipes; what is written there
	 * goes where stdout and stderr go. */
	int out = EXPECT(open("/dev/stdout", O_WRONLY), 3);
	EXPECT_TRUE(same_file(out, 1));
	EXPECT(fstat(out, &st), 0);
	EXPECT_TRUE(S_ISFIFO(st.st_mode));
	fflush(stdout);
	EXPECT(write(out, "written to /dev/stdout\n", 23), 23);
	EXPECT(close(out), 0);
	int err = EXPECT(open("/dev/stderr", O_WRONLY), 3);
	EXPECT_TRUE(same_file(err, 2));
	EXPECT(write(err, "written to /dev/stderr\n", 23), 23);
	EXPECT(close(err), 0);
	/* Through the /proc links as well. */
	out = EXPECT(open("/proc/self/fd/1", O_WRONLY), 3);
	fflush(stdout);
	EXPECT(write(out, "written to /proc/self/fd/1\n", 27), 27);
	EXPECT(close(out), 0);

	/* The links' modes say the access mode: r-x, -wx, rwx, and none for
	 * O_PATH. */
	const int modes[] = {O_RDONLY, O_WRONLY, O_RDWR, O_PATH};
	snprintf(path, sizeof path, "/tmp/dev_fd.%d", getpid());
	EXPECT(close(EXPECT(open(path, O_CREAT | O_WRONLY, 0600), 3)), 0);
	for (unsigned i = 0; i < sizeof modes / sizeof modes[0]; i++) {
		int f = EXPECT(open(path, modes[i]), 3);
		EXPECT(lstat("/proc/self/fd/3", &st), 0);
		SHOW("open mode %#o: link mode %03o", modes[i], st.st_mode & 0777);
		EXPECT(close(f), 0);
	}
	EXPECT(unlink(path), 0);
	return t_done();
}
