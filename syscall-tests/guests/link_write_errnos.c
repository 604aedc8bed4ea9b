/* Errnos Linux checks first: a hard link across mounts is EXDEV (before
 * any other check), and an empty write needs a descriptor open for
 * writing. */
#include "t.h"

int main(void)
{
	char name[64];
	snprintf(name, sizeof name, "/dev/shm/link-exdev-%d", (int)getpid());
	/* The root's file into a tmpfs mount, and back. */
	EXPECT_ERR(link("/etc/passwd", name), EXDEV);
	EXPECT_ERR(linkat(AT_FDCWD, "/etc/passwd", AT_FDCWD, name, AT_SYMLINK_FOLLOW), EXDEV);
	int fd = EXPECT(open("/etc/passwd", O_RDONLY), 3);
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	EXPECT_ERR(linkat(AT_FDCWD, proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW), EXDEV);
	int w = EXPECT(open(name, O_CREAT | O_WRONLY | O_EXCL, 0600), 4);
	EXPECT_ERR(link(name, "/etc/link-exdev-back"), EXDEV);
	/* An existing target is EEXIST even across mounts. */
	EXPECT_ERR(link("/etc/passwd", name), EEXIST);
	/* Empty writes. */
	EXPECT(write(w, "", 0), 0);
	EXPECT_ERR(write(fd, "", 0), EBADF);
	int p = EXPECT(open("/etc/passwd", O_PATH), 5);
	EXPECT_ERR(write(p, "", 0), EBADF);
	EXPECT_ERR(write(99, "", 0), EBADF);
	EXPECT(close(p), 0);
	EXPECT(close(w), 0);
	EXPECT(unlink(name), 0);
	EXPECT(close(fd), 0);
	return t_done();
}
