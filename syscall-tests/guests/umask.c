/* umask round trip; only the permission bits are kept. */
#include "t.h"

int main(void)
{
	mode_t orig = umask(077);
	EXPECT(umask(022), 077);
	EXPECT(umask(0777777), 022);
	EXPECT(umask(orig), 0777);
	EXPECT(syscall(SYS_umask, orig), orig);
	return t_done();
}
