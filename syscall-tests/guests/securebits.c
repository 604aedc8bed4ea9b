/* Secure bits (capabilities(7), PR_SET_SECUREBITS): setting them needs
 * CAP_SETPCAP, a locked bit can neither change nor be unlocked, unknown bits
 * are refused; SECBIT_KEEP_CAPS is PR_SET_KEEPCAPS and goes at execve (its
 * lock stays); SECBIT_NO_CAP_AMBIENT_RAISE refuses ambient raises;
 * SECBIT_NO_SETUID_FIXUP keeps the sets across a change of user ids;
 * SECBIT_NOROOT gives root nothing at execve. Natively this runs as root on
 * the host: every change happens in a child. */
#include "caps.h"
#include <sys/prctl.h>

#define SELF GUEST_DIR "/securebits"
#define BIT(c) (1ULL << (c))
#define NOROOT 0x01
#define NOROOT_LOCKED 0x02
#define NO_SETUID_FIXUP 0x04
#define KEEP_CAPS 0x10
#define KEEP_CAPS_LOCKED 0x20
#define NO_CAP_AMBIENT_RAISE 0x40

static void setting(void)
{
	EXPECT(prctl(PR_GET_SECUREBITS), 0);
	EXPECT(prctl(PR_SET_SECUREBITS, KEEP_CAPS), 0);
	EXPECT(prctl(PR_GET_SECUREBITS), KEEP_CAPS);
	EXPECT(prctl(PR_GET_KEEPCAPS), 1);
	EXPECT(prctl(PR_SET_KEEPCAPS, 0), 0);
	EXPECT(prctl(PR_GET_SECUREBITS), 0);
	/* unknown bits */
	EXPECT_ERR(prctl(PR_SET_SECUREBITS, 1UL << 20), EPERM);
	/* lock KEEP_CAPS on: it can no longer go off, nor the lock */
	EXPECT(prctl(PR_SET_SECUREBITS, KEEP_CAPS | KEEP_CAPS_LOCKED), 0);
	EXPECT(prctl(PR_GET_SECUREBITS), KEEP_CAPS | KEEP_CAPS_LOCKED);
	EXPECT_ERR(prctl(PR_SET_KEEPCAPS, 0), EPERM);
	EXPECT_ERR(prctl(PR_SET_SECUREBITS, KEEP_CAPS), EPERM);
	EXPECT_ERR(prctl(PR_SET_SECUREBITS, KEEP_CAPS_LOCKED), EPERM);
	/* (even to the value it has) */
	EXPECT_ERR(prctl(PR_SET_KEEPCAPS, 1), EPERM);
	/* other bits still change */
	EXPECT(prctl(PR_SET_SECUREBITS, KEEP_CAPS | KEEP_CAPS_LOCKED | NOROOT), 0);
	EXPECT(prctl(PR_GET_SECUREBITS), KEEP_CAPS | KEEP_CAPS_LOCKED | NOROOT);
	EXPECT_ERR(prctl(PR_SET_KEEPCAPS, 2), EINVAL);
}

static void needs_setpcap(void)
{
	struct sets s = get();
	s.eff &= ~BIT(CAP_SETPCAP);
	EXPECT(set(s), 0);
	EXPECT_ERR(prctl(PR_SET_SECUREBITS, KEEP_CAPS), EPERM);
	/* PR_SET_KEEPCAPS needs nothing */
	EXPECT(prctl(PR_SET_KEEPCAPS, 1), 0);
	EXPECT(prctl(PR_GET_SECUREBITS), KEEP_CAPS);
}

static void no_ambient_raise(void)
{
	struct sets s = get();
	s.inh |= BIT(CAP_KILL);
	EXPECT(set(s), 0);
	EXPECT(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_KILL, 0, 0), 0);
	EXPECT(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), 0);
	EXPECT(prctl(PR_SET_SECUREBITS, NO_CAP_AMBIENT_RAISE), 0);
	EXPECT_ERR(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_KILL, 0, 0), EPERM);
	EXPECT(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_KILL, 0, 0), 0);
}

static void no_setuid_fixup(void)
{
	unsigned long long before = get().prm;
	EXPECT(prctl(PR_SET_SECUREBITS, NO_SETUID_FIXUP), 0);
	EXPECT(setresuid(1000, 1000, 1000), 0);
	struct sets s = get();
	EXPECT_TRUE(s.prm == before && s.eff == before);
	/* and back to 0: still unchanged */
	EXPECT(setresuid(0, 0, 0), 0);
	EXPECT_TRUE(get().eff == before);
}

static void fixup_by_default(void)
{
	EXPECT(setresuid(1000, 1000, 1000), 0);
	struct sets s = get();
	EXPECT_TRUE(s.prm == 0 && s.eff == 0);
}

/* execs itself with `what`; the new image prints its sets and bits */
static void exec_self(const char *what)
{
	fflush(stdout);
	char *argv[] = {(char *)SELF, (char *)what, NULL};
	char *envp[] = {NULL};
	execve(SELF, argv, envp);
	SHOW("execve failed: %s", errname(errno));
	_exit(1);
}

static void noroot_exec(void)
{
	EXPECT(prctl(PR_SET_SECUREBITS, NOROOT | NOROOT_LOCKED | KEEP_CAPS | KEEP_CAPS_LOCKED), 0);
	exec_self("after-noroot");
}

static void plain_exec(void)
{
	EXPECT(prctl(PR_SET_KEEPCAPS, 1), 0);
	exec_self("after-plain");
}

static void after(const char *what)
{
	struct sets s = get();
	SHOW("%s: securebits %#lx keepcaps %d permitted %s effective %s", what,
	     (unsigned long)prctl(PR_GET_SECUREBITS), prctl(PR_GET_KEEPCAPS),
	     s.prm == 0 ? "none" : "some", s.eff == 0 ? "none" : "some");
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		after(argv[1]);
		return t_done();
	}
	in_child("setting and locking", setting);
	in_child("CAP_SETPCAP", needs_setpcap);
	in_child("NO_CAP_AMBIENT_RAISE", no_ambient_raise);
	in_child("NO_SETUID_FIXUP", no_setuid_fixup);
	in_child("uid change without it", fixup_by_default);
	in_child("NOROOT at execve", noroot_exec);
	in_child("plain execve", plain_exec);
	return t_done();
}
