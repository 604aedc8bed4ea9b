/* inotify: watch arguments, the events file operations raise on a watched
 * directory and on a watched file, one-shot watches, rm_watch, and the
 * read buffer rules. Each instance watches one object, so the order of
 * events is Linux's defined one. */
#include "t.h"
#include <sys/inotify.h>
#include <sys/ioctl.h>

static const char *names[] = { "ACCESS", "MODIFY", "ATTRIB", "CLOSE_WRITE", "CLOSE_NOWRITE",
	"OPEN", "MOVED_FROM", "MOVED_TO", "CREATE", "DELETE", "DELETE_SELF", "MOVE_SELF" };

static unsigned last_cookie;

/* Prints every queued event of `fd`: wd, mask names, name. */
static void drain(const char *who, int fd)
{
	char buf[4096] __attribute__((aligned(8)));
	long n = read(fd, buf, sizeof buf);
	if (n < 0) {
		printf("%s: none (%s)\n", who, errname(errno));
		return;
	}
	for (char *p = buf; p < buf + n;) {
		struct inotify_event *e = (struct inotify_event *)p;
		printf("%s: wd=%d", who, e->wd);
		for (unsigned i = 0; i < sizeof names / sizeof *names; i++)
			if (e->mask & (1u << i))
				printf(" %s", names[i]);
		if (e->mask & IN_ISDIR)
			printf(" ISDIR");
		if (e->mask & IN_IGNORED)
			printf(" IGNORED");
		if (e->len)
			printf(" name=%s len=%u", e->name, e->len);
		if (e->cookie) {
			printf(" cookie=%s", e->cookie == last_cookie ? "same" : "new");
			last_cookie = e->cookie;
		}
		printf("\n");
		p += sizeof *e + e->len;
	}
}

static void put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	if (fd < 0 || write(fd, text, strlen(text)) < 0)
		t_fail(path);
	close(fd);
}

/* The checks, in the new directory `d` (removed at the end). */
static int inotify_checks(const char *d)
{
	char p[4200], q[4200];
	int a = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	EXPECT_TRUE(a >= 0);
	EXPECT_ERR(inotify_init1(IN_NONBLOCK << 1), EINVAL);
	char small[8];
	EXPECT_ERR(read(a, small, sizeof small), EAGAIN);

	/* Arguments. */
	EXPECT(inotify_add_watch(a, d, IN_ALL_EVENTS), 1);
	EXPECT(inotify_add_watch(a, d, IN_ALL_EVENTS), 1);
	EXPECT_ERR(inotify_add_watch(a, d, IN_ALL_EVENTS | IN_MASK_CREATE), EEXIST);
	EXPECT_ERR(inotify_add_watch(a, d, IN_CREATE | IN_MASK_ADD | IN_MASK_CREATE), EINVAL);
	EXPECT_ERR(inotify_add_watch(a, d, 0), EINVAL);
	snprintf(p, sizeof p, "%s/missing", d);
	EXPECT_ERR(inotify_add_watch(a, p, IN_ALL_EVENTS), ENOENT);
	EXPECT_ERR(inotify_add_watch(0, d, IN_ALL_EVENTS), EINVAL);
	EXPECT_ERR(inotify_add_watch(a, BADPTR, IN_ALL_EVENTS), EFAULT);

	/* A watched directory hears about its children. */
	snprintf(p, sizeof p, "%s/first", d);
	put(p, "hello");
	drain("dir", a);
	int fa = open(p, O_RDONLY);
	char buf[8];
	EXPECT(read(fa, buf, sizeof buf), 5);
	close(fa);
	EXPECT(chmod(p, 0600), 0);
	EXPECT(truncate(p, 1), 0);
	EXPECT(utimensat(AT_FDCWD, p, NULL, 0), 0);
	drain("dir", a);
	snprintf(q, sizeof q, "%s/second", d);
	EXPECT(rename(p, q), 0);
	snprintf(p, sizeof p, "%s/sub", d);
	EXPECT(mkdir(p, 0755), 0);
	EXPECT(rmdir(p), 0);
	EXPECT(symlink("second", p), 0);
	EXPECT(unlink(p), 0);
	EXPECT(unlink(q), 0);
	drain("dir", a);

	/* Read buffer: an event with a name needs 16 + 16 bytes here. */
	snprintf(p, sizeof p, "%s/abc", d);
	EXPECT(mkdir(p, 0755), 0);
	int queued = -1;
	EXPECT(ioctl(a, FIONREAD, &queued), 0);
	EXPECT(queued, 32);
	char sixteen[16];
	EXPECT_ERR(read(a, sixteen, sizeof sixteen), EINVAL);
	drain("dir", a);

	/* A watched file: its own events, then its end. */
	int b = inotify_init1(IN_NONBLOCK);
	snprintf(p, sizeof p, "%s/watched", d);
	put(p, "x");
	EXPECT_ERR(inotify_add_watch(b, p, IN_ALL_EVENTS | IN_ONLYDIR), ENOTDIR);
	EXPECT(inotify_add_watch(b, p, IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF), 1);
	int fb = open(p, O_WRONLY | O_APPEND);
	EXPECT(write(fb, "y", 1), 1);
	close(fb);
	EXPECT(chmod(p, 0600), 0);
	EXPECT(unlink(p), 0);
	drain("file", b);

	/* A watched directory that is removed. */
	int c = inotify_init1(IN_NONBLOCK);
	snprintf(p, sizeof p, "%s/abc", d);
	EXPECT(inotify_add_watch(c, p, IN_ALL_EVENTS), 1);
	EXPECT(rmdir(p), 0);
	drain("gone", c);
	drain("dir", a);

	/* One-shot, and rm_watch. */
	int o = inotify_init1(IN_NONBLOCK);
	EXPECT(inotify_add_watch(o, d, IN_CREATE | IN_ONESHOT), 1);
	snprintf(p, sizeof p, "%s/one", d);
	put(p, "1");
	snprintf(q, sizeof q, "%s/two", d);
	put(q, "2");
	drain("oneshot", o);
	EXPECT(inotify_rm_watch(a, 1), 0);
	EXPECT_ERR(inotify_rm_watch(a, 1), EINVAL);
	EXPECT(unlink(p), 0);
	EXPECT(unlink(q), 0);
	drain("dir", a);
	EXPECT(rmdir(d), 0);
	return t_done();
}

#ifndef INOTIFY_CHECKS_ONLY
int main(void)
{
	char d[] = "/tmp/inotify-XXXXXX";
	if (!mkdtemp(d))
		return 99;
	return inotify_checks(d);
}
#endif
