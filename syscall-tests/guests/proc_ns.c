/* /proc/[pid]/ns: a link per namespace, naming it as "kind:[inode]", the
 * inode its file has; setns into the caller's own namespaces. */
#include "t.h"
#include <dirent.h>
#include <sched.h>

static const char *names[] = {"cgroup", "ipc", "mnt", "net", "pid", "pid_for_children",
			      "time", "time_for_children", "user", "uts"};

/* The link's inode number when it reads "KIND:[N]", else 0. */
static unsigned long link_ino(const char *path, const char *kind)
{
	char buf[64] = {0}, want[32];
	if (readlink(path, buf, sizeof buf - 1) < 0)
		return 0;
	snprintf(want, sizeof want, "%s:[", kind);
	if (strncmp(buf, want, strlen(want)))
		return 0;
	return strtoul(buf + strlen(want), 0, 10);
}

int main(void)
{
	DIR *d = opendir("/proc/self/ns");
	EXPECT_TRUE(d != NULL);
	int count = 0;
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		int known = 0;
		for (size_t i = 0; i < sizeof names / sizeof *names; i++)
			known |= !strcmp(e->d_name, names[i]);
		if (!known || e->d_type != DT_LNK)
			SHOW("unexpected entry %s", e->d_name);
		count++;
	}
	if (d)
		closedir(d);
	SHOW("entries: %d", count);
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		char path[64];
		snprintf(path, sizeof path, "/proc/self/ns/%s", names[i]);
		const char *kind = !strcmp(names[i], "pid_for_children") ? "pid"
				 : !strcmp(names[i], "time_for_children") ? "time" : names[i];
		unsigned long ino = link_ino(path, kind);
		struct stat st, lst;
		int ok = ino != 0 && stat(path, &st) == 0 && st.st_ino == ino && S_ISREG(st.st_mode) &&
			 lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode) && (lst.st_mode & 0777) == 0777;
		SHOW("%s: names its namespace, whose file has that inode: %s", names[i], ok ? "yes" : "no");
	}
	EXPECT_TRUE(link_ino("/proc/self/ns/pid", "pid") == link_ino("/proc/self/ns/pid_for_children", "pid"));
	unsigned long net = link_ino("/proc/self/ns/net", "net");
	char self_path[64];
	snprintf(self_path, sizeof self_path, "/proc/%d/ns/net", getpid());
	EXPECT_TRUE(link_ino(self_path, "net") == net);
	EXPECT_ERR(readlink("/proc/self/ns/nope", self_path, sizeof self_path), ENOENT);

	/* A child is in the same namespaces. */
	pid_t c = fork();
	if (c == 0)
		_exit(link_ino("/proc/self/ns/net", "net") == net ? 0 : 1);
	int ws;
	waitpid(c, &ws, 0);
	SHOW("child in the same net namespace: %s", WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? "yes" : "no");

	/* setns into one's own namespaces. */
	int fd = open("/proc/self/ns/net", O_RDONLY);
	EXPECT_TRUE(fd >= 0);
	char byte;
	EXPECT_ERR(read(fd, &byte, 1), EINVAL);
	EXPECT(setns(fd, CLONE_NEWNET), 0);
	EXPECT(setns(fd, 0), 0);
	EXPECT_ERR(setns(fd, CLONE_NEWUTS), EINVAL);
	int uts = open("/proc/self/ns/uts", O_RDONLY);
	EXPECT(setns(uts, CLONE_NEWUTS), 0);
	int user = open("/proc/self/ns/user", O_RDONLY);
	EXPECT_ERR(setns(user, CLONE_NEWUSER), EINVAL);
	int pipefd[2];
	EXPECT(pipe(pipefd), 0);
	EXPECT_ERR(setns(pipefd[0], 0), EINVAL);
	EXPECT_ERR(setns(999, 0), EBADF);
	c = fork();
	if (c == 0) {
		if (setuid(65534))
			_exit(2);
		_exit(setns(fd, CLONE_NEWNET) == -1 && errno == EPERM ? 0 : 1);
	}
	waitpid(c, &ws, 0);
	SHOW("nobody may not setns: %s", WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? "yes" : "no");
	return t_done();
}
