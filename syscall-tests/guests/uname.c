/* uname: fixed identity fields only (release and host names differ). */
#include "t.h"
#include <sys/utsname.h>

int main(void)
{
	struct utsname u;
	EXPECT(uname(&u), 0);
	SHOW("sysname=%s machine=%s", u.sysname, u.machine);
	EXPECT_TRUE(strlen(u.release) > 0 && strlen(u.nodename) > 0);
	EXPECT_TRUE(u.release[0] >= '3' && u.release[0] <= '9' && u.release[1] == '.');
	EXPECT_ERR(syscall(SYS_uname, BADPTR), EFAULT);
	return t_done();
}
