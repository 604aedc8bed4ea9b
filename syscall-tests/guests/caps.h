/*
 * caps.h - a guest's capability sets through capget/capset, as 64-bit
 * masks (for the guests that change them).
 */
#ifndef CAPS_H
#define CAPS_H

#include "t.h"
#include <linux/capability.h>

struct sets {
	unsigned long long eff, prm, inh;
};

T_UNUSED static struct sets get(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof d);
	if (syscall(SYS_capget, &h, d) != 0)
		SHOW("capget failed: %s", errname(errno));
	struct sets s = {
		(unsigned long long)d[1].effective << 32 | d[0].effective,
		(unsigned long long)d[1].permitted << 32 | d[0].permitted,
		(unsigned long long)d[1].inheritable << 32 | d[0].inheritable,
	};
	return s;
}

T_UNUSED static long set(struct sets s)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2] = {
		{(unsigned)s.eff, (unsigned)s.prm, (unsigned)s.inh},
		{(unsigned)(s.eff >> 32), (unsigned)(s.prm >> 32), (unsigned)(s.inh >> 32)},
	};
	return syscall(SYS_capset, &h, d);
}

/* Runs `fn` in a child, under the heading `what`, and expects it to pass
 * (the guests that change their credentials do it in children). */
T_UNUSED static void in_child(const char *what, void (*fn)(void))
{
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		t_failures = 0;
		SHOW("-- %s", what);
		fn();
		fflush(stdout);
		_exit(t_failures ? 1 : 0);
	}
	int st = -1;
	EXPECT_TRUE(waitpid(c, &st, 0) == c);
	EXPECT(st, 0);
}

#endif
