/* getrandom: counts only (the bytes are random), flags, bad buffers. */
#include "t.h"
#include <sys/random.h>

int main(void)
{
	unsigned char a[256], b[256];
	EXPECT(getrandom(a, 32, 0), 32);
	EXPECT(getrandom(a, sizeof a, 0), 256);
	EXPECT(getrandom(b, sizeof b, GRND_NONBLOCK), 256);
	EXPECT(getrandom(b, 16, GRND_RANDOM), 16);
	EXPECT(getrandom(b, 0, 0), 0);
	/* Two 256-byte draws are equal with probability 2^-2048. */
	EXPECT_TRUE(memcmp(a, b, sizeof a) != 0);
	EXPECT_ERR(getrandom(a, 16, 0x100), EINVAL);
	EXPECT_ERR(getrandom(a, 16, GRND_INSECURE | GRND_RANDOM), EINVAL);
	EXPECT_ERR(syscall(SYS_getrandom, BADPTR, 16, 0), EFAULT);
	return t_done();
}
