/* Capabilities as root sees them (capabilities(7)): capget/capset and their
 * rules, the bounding and ambient sets through prctl, /proc/self/status
 * agreeing with capget, what execve and a change of user ids do to the sets,
 * and no_new_privs. Facts are relative to the starting sets, which differ
 * between hosts. */
#include "caps.h"
#include <linux/capability.h>
#include <sys/prctl.h>

#define SELF GUEST_DIR "/capabilities"
#define BIT(c) (1ULL << (c))

/* A hex field of /proc/self/status. */
static unsigned long long status(const char *name)
{
	char line[256];
	unsigned long long v = ~0ULL;
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return v;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, name, strlen(name)))
			v = strtoull(line + strlen(name), NULL, 16);
	fclose(f);
	return v;
}

static unsigned long long bounding(void)
{
	unsigned long long b = 0;
	for (int c = 0; c < 64 && prctl(PR_CAPBSET_READ, c, 0, 0, 0) >= 0; c++)
		if (prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1)
			b |= BIT(c);
	return b;
}

static int after_exec(void)
{
	struct sets s = get();
	/* Root's permitted set is its bounding set (plus inheritable). */
	EXPECT_TRUE(s.prm == (bounding() | s.inh));
	EXPECT_TRUE(s.eff == s.prm);
	EXPECT_TRUE(!(s.prm & BIT(CAP_NET_RAW)));
	EXPECT_TRUE(s.prm & BIT(CAP_CHOWN));
	EXPECT_TRUE(s.inh == BIT(CAP_CHOWN));
	EXPECT(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_CHOWN, 0, 0), 1);
	EXPECT(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), 1);
	EXPECT_TRUE(status("NoNewPrivs:") == 1);
	return t_done();
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "after-exec"))
		return after_exec();
	EXPECT(getuid(), 0);

	/* Versions: an unknown one is answered with the preferred one. */
	struct __user_cap_header_struct h = {0x1234, 0};
	struct __user_cap_data_struct d[2];
	EXPECT(syscall(SYS_capget, &h, NULL), 0);
	EXPECT_TRUE(h.version == _LINUX_CAPABILITY_VERSION_3);
	h.version = 0x1234;
	EXPECT_ERR(syscall(SYS_capget, &h, d), EINVAL);
	EXPECT_TRUE(h.version == _LINUX_CAPABILITY_VERSION_3);
	h.version = _LINUX_CAPABILITY_VERSION_3;
	h.pid = -1;
	EXPECT_ERR(syscall(SYS_capget, &h, d), EINVAL);
	h.pid = 0;
	EXPECT_ERR(syscall(SYS_capget, &h, BADPTR), EFAULT);
	EXPECT_ERR(syscall(SYS_capget, BADPTR, d), EFAULT);
	h.version = _LINUX_CAPABILITY_VERSION_1;
	EXPECT(syscall(SYS_capget, &h, d), 0);

	struct sets s = get();
	EXPECT_TRUE(s.eff == s.prm);
	EXPECT_TRUE(s.prm & BIT(CAP_CHOWN));
	EXPECT_TRUE(s.inh == 0);
	EXPECT_TRUE(status("CapEff:") == s.eff);
	EXPECT_TRUE(status("CapPrm:") == s.prm);
	EXPECT_TRUE(status("CapInh:") == 0);
	EXPECT_TRUE(status("CapBnd:") == bounding());
	EXPECT_TRUE(status("CapAmb:") == 0);
	EXPECT(prctl(PR_CAPBSET_READ, CAP_CHOWN, 0, 0, 0), 1);
	EXPECT_ERR(prctl(PR_CAPBSET_READ, 63, 0, 0, 0), EINVAL);

	/* capset: the effective set may shrink and grow within the permitted
	 * one; the permitted one only shrinks. */
	struct sets t = s;
	t.eff &= ~BIT(CAP_NET_RAW);
	EXPECT(set(t), 0);
	EXPECT_TRUE(get().eff == t.eff && get().prm == s.prm);
	EXPECT_TRUE(status("CapEff:") == t.eff);
	EXPECT(set(s), 0);
	t = s;
	t.prm &= ~BIT(CAP_NET_RAW);
	EXPECT_ERR(set(t), EPERM); /* effective beyond permitted */
	t.eff &= ~BIT(CAP_NET_RAW);
	EXPECT(set(t), 0);
	EXPECT_ERR(set(s), EPERM); /* permitted cannot grow back */
	h.pid = 1 << 22;
	EXPECT_ERR(syscall(SYS_capset, &h, d), EPERM); /* not ourselves */

	/* Ambient: permitted and inheritable both needed. */
	EXPECT_ERR(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_CHOWN, 0, 0), EPERM);
	struct sets i = t;
	i.inh = BIT(CAP_CHOWN) | BIT(CAP_KILL);
	EXPECT(set(i), 0);
	EXPECT(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_CHOWN, 0, 0), 0);
	EXPECT(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_KILL, 0, 0), 0);
	EXPECT(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_CHOWN, 0, 0), 1);
	EXPECT(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_SETUID, 0, 0), 0);
	EXPECT_TRUE(status("CapAmb:") == (BIT(CAP_CHOWN) | BIT(CAP_KILL)));
	EXPECT(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER, CAP_KILL, 0, 0), 0);
	EXPECT_ERR(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_RAW, 0, 0), EPERM);
	EXPECT_ERR(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, 63, 0, 0), EINVAL);
	EXPECT_ERR(prctl(PR_CAP_AMBIENT, 99, CAP_CHOWN, 0, 0), EINVAL);
	EXPECT_ERR(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 1, 0, 0), EINVAL);
	/* Leaving the inheritable set leaves the ambient one. */
	i.inh = BIT(CAP_CHOWN);
	EXPECT(set(i), 0);
	EXPECT_TRUE(status("CapAmb:") == BIT(CAP_CHOWN));

	/* A change of user ids (each in a child). */
	pid_t c = fork();
	if (c == 0) {
		EXPECT(seteuid(1000), 0);
		EXPECT_TRUE(get().eff == 0 && get().prm == i.prm);
		EXPECT(seteuid(0), 0);
		EXPECT_TRUE(get().eff == i.prm);
		EXPECT(setresuid(1000, 1000, 1000), 0);
		struct sets u = get();
		EXPECT_TRUE(u.eff == 0 && u.prm == 0 && u.inh == BIT(CAP_CHOWN));
		EXPECT(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_CHOWN, 0, 0), 0);
		EXPECT_TRUE(status("CapPrm:") == 0);
		exit(t_failures ? 1 : 0);
	}
	int st;
	EXPECT_TRUE(waitpid(c, &st, 0) == c);
	EXPECT(st, 0);

	/* The bounding set: dropping needs CAP_SETPCAP. */
	EXPECT(prctl(PR_CAPBSET_DROP, CAP_NET_RAW, 0, 0, 0), 0);
	EXPECT(prctl(PR_CAPBSET_READ, CAP_NET_RAW, 0, 0, 0), 0);
	EXPECT_ERR(prctl(PR_CAPBSET_DROP, 63, 0, 0, 0), EINVAL);
	c = fork();
	if (c == 0) {
		struct sets n = get();
		n.eff &= ~BIT(CAP_SETPCAP);
		EXPECT(set(n), 0);
		EXPECT_ERR(prctl(PR_CAPBSET_DROP, CAP_KILL, 0, 0, 0), EPERM);
		exit(t_failures ? 1 : 0);
	}
	EXPECT_TRUE(waitpid(c, &st, 0) == c);
	EXPECT(st, 0);

	/* no_new_privs, then execve: root's sets are recomputed. */
	EXPECT(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	EXPECT(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), 1);
	EXPECT_TRUE(status("NoNewPrivs:") == 1);
	i.eff = 0;
	EXPECT(set(i), 0);
	char *cargv[] = {SELF, "after-exec", NULL};
	fflush(stdout);
	if (t_failures)
		return t_done();
	execve(SELF, cargv, NULL);
	SHOW("execve failed: errno=%s", errname(errno));
	return 1;
}
