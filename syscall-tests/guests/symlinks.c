/* Path resolution through relative, absolute, chained and ".." symlinks. */
#include "t.h"

static void cat(const char *path)
{
	char buf[64];
	long n = t_slurp(path, buf, sizeof buf);
	if (n >= 0) {
		char *nl = strchr(buf, '\n');
		if (nl)
			*nl = 0;
		SHOW("read %s: %s", path, buf);
	} else {
		SHOW("read %s: errno=%s", path, errname(errno));
	}
}

int main(void)
{
	cat(FIX("link_rel"));
	cat(FIX("link_abs"));
	cat(FIX("link_link"));
	cat(FIX("link_dotdot"));
	cat(FIX("dir/up"));
	cat(FIX("link_dir/a"));
	/* ".." after a symlinked directory is the parent of the target. */
	cat(FIX("link_dir/../file.txt"));
	cat(FIX("link_dir/up"));
	cat(FIX("link_dir/sub/../b"));
	cat(FIX("dangling"));
	cat(FIX("link_rel/"));
	cat(FIX("link_dir/"));

	struct stat st;
	/* /bin -> usr/bin, so /bin/.. is /usr, which has no etc/passwd. */
	EXPECT_ERR(stat("/bin/../etc/passwd", &st), ENOENT);
	EXPECT(stat("/bin/../lib/os-release", &st), 0);
	EXPECT(stat("/usr/bin/../../etc/passwd", &st), 0);
	/* An absolute target that goes through another symlink (/lib). */
	EXPECT(stat("/lib64/ld-linux-x86-64.so.2", &st), 0);
	EXPECT_TRUE(S_ISREG(st.st_mode));
	/* ".." at the root stays at the root. */
	EXPECT(stat("/../../../etc/passwd", &st), 0);
	EXPECT(stat("/./etc/./passwd", &st), 0);
	/* Trailing slash: fine on a link to a directory, not on a file. */
	EXPECT(stat(FIX("link_dir/"), &st), 0);
	EXPECT_TRUE(S_ISDIR(st.st_mode));
	EXPECT(lstat(FIX("link_dir/"), &st), 0);
	EXPECT_TRUE(S_ISDIR(st.st_mode));
	EXPECT_ERR(stat(FIX("link_rel/"), &st), ENOTDIR);
	EXPECT_ERR(lstat(FIX("link_rel/"), &st), ENOTDIR);
	EXPECT_ERR(lstat(FIX("dangling/"), &st), ENOENT);
	return t_done();
}
