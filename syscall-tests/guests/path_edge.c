/* Path edge cases: empty, slashes, dots, trailing slash, overlong paths. */
#include "t.h"

int main(void)
{
	struct stat st;
	static char path[8192];

	EXPECT_ERR(stat("", &st), ENOENT);
	EXPECT_ERR(open("", O_RDONLY), ENOENT);
	EXPECT(stat("//etc///passwd", &st), 0);
	EXPECT_TRUE(S_ISREG(st.st_mode));
	EXPECT(stat("/etc/", &st), 0);
	EXPECT(stat("/etc/.", &st), 0);
	EXPECT(stat("/etc//", &st), 0);
	EXPECT(stat("/", &st), 0);
	EXPECT(stat("//", &st), 0);
	EXPECT(stat(".", &st), 0);
	EXPECT(stat("..", &st), 0);
	EXPECT_ERR(stat("/etc/passwd/", &st), ENOTDIR);
	EXPECT_ERR(stat("/etc/passwd/.", &st), ENOTDIR);
	EXPECT_ERR(stat("/etc/passwd/..", &st), ENOTDIR);
	EXPECT_ERR(open("/etc/passwd/", O_RDONLY), ENOTDIR);
	EXPECT_ERR(stat("/etc/nonexistent/..", &st), ENOENT);
	EXPECT_ERR(stat("/etc/...", &st), ENOENT);

	/* A name component longer than NAME_MAX (255). */
	strcpy(path, "/etc/");
	memset(path + 5, 'a', 256);
	path[5 + 256] = 0;
	EXPECT_ERR(stat(path, &st), ENAMETOOLONG);
	path[5 + 255] = 0;
	EXPECT_ERR(stat(path, &st), ENOENT);

	/* A whole path of PATH_MAX bytes or more (NUL included). */
	memset(path, 0, sizeof path);
	for (int i = 0; i + 2 < 5000; i += 2)
		memcpy(path + i, "/.", 2);
	EXPECT_ERR(stat(path, &st), ENAMETOOLONG);
	EXPECT_ERR(open(path, O_RDONLY), ENAMETOOLONG);
	EXPECT_ERR(chdir(path), ENAMETOOLONG);
	/* Exactly 4095 characters plus NUL fits. */
	memset(path, 0, sizeof path);
	for (int i = 0; i < 4094; i += 2)
		memcpy(path + i, "/.", 2);
	path[4094] = '/';
	EXPECT(strlen(path), 4095);
	EXPECT(stat(path, &st), 0);
	path[4095] = '.';
	EXPECT_ERR(stat(path, &st), ENAMETOOLONG);
	/* Many slashes are not many components. */
	memset(path, '/', 4000);
	strcpy(path + 4000, "etc/passwd");
	EXPECT(stat(path, &st), 0);
	return t_done();
}
