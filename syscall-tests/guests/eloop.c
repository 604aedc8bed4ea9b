/* Symlink loops and the 40-link limit (MAXSYMLINKS). */
#include "t.h"

int main(void)
{
	struct stat st;
	char buf[32];
	EXPECT_ERR(stat(FIX("loop_a"), &st), ELOOP);
	EXPECT_ERR(open(FIX("loop_b"), O_RDONLY), ELOOP);
	EXPECT_ERR(stat(FIX("self"), &st), ELOOP);
	EXPECT_ERR(stat(FIX("self/x"), &st), ELOOP);
	EXPECT(lstat(FIX("loop_a"), &st), 0);
	EXPECT_TRUE(S_ISLNK(st.st_mode));
	EXPECT(readlink(FIX("loop_a"), buf, sizeof buf), 6);
	/* 40 links in a row resolve, 41 do not. */
	EXPECT(stat(FIX("chain/0"), &st), 0);
	EXPECT(st.st_size, 14);
	EXPECT(t_slurp(FIX("chain/0"), buf, sizeof buf), 14);
	EXPECT_ERR(stat(FIX("chain/start"), &st), ELOOP);
	EXPECT_ERR(open(FIX("chain/start"), O_RDONLY), ELOOP);
	EXPECT(stat(FIX("chain/1"), &st), 0);
	EXPECT(lstat(FIX("chain/start"), &st), 0);
	EXPECT_ERR(chdir(FIX("self")), ELOOP);
	EXPECT_ERR(access(FIX("loop_a"), F_OK), ELOOP);
	return t_done();
}
