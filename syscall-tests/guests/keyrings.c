/* Kernel keyrings (keyrings(7)): add_key, keyctl and request_key in a
 * session keyring of the test's own, so nothing outside it changes. */
#include "t.h"
#include <linux/keyctl.h>

/* keyutils.h's permission bits (the kernel headers lack them). */
#define KEY_POS_VIEW 0x01000000
#define KEY_POS_ALL 0x3f000000
#define KEY_USR_VIEW 0x00010000

static long add_key(const char *type, const char *desc, const void *p, size_t n, long ring)
{
	return syscall(SYS_add_key, type, desc, p, n, ring);
}

static long keyctl(long op, long a, long b, long c, long d)
{
	return syscall(SYS_keyctl, op, a, b, c, d);
}

static void describe(const char *what, long id)
{
	char buf[256] = {0};
	long n = keyctl(KEYCTL_DESCRIBE, id, (long)buf, sizeof buf, 0);
	SHOW("describe %s: %ld \"%s\" (strlen+1 %zu)", what, n, buf, strlen(buf) + 1);
}

static void read_key(const char *what, long id)
{
	char buf[64] = {0};
	errno = 0;
	long n = keyctl(KEYCTL_READ, id, (long)buf, sizeof buf, 0);
	if (n < 0)
		SHOW("read %s: %s", what, errname(errno));
	else
		SHOW("read %s: %ld \"%.*s\"", what, n, (int)(n < 64 ? n : 64), buf);
}

int main(void)
{
	long ses = keyctl(KEYCTL_JOIN_SESSION_KEYRING, 0, 0, 0, 0);
	EXPECT_TRUE(ses > 0);
	EXPECT_TRUE(keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0, 0, 0) == ses);
	describe("session", ses);

	long k = add_key("user", "k1", "hello", 5, KEY_SPEC_SESSION_KEYRING);
	EXPECT_TRUE(k > 0);
	describe("user key", k);
	read_key("user key", k);
	char two[2];
	EXPECT(keyctl(KEYCTL_READ, k, (long)two, 2, 0), 5);
	EXPECT(keyctl(KEYCTL_READ, k, 0, 0, 0), 5);
	/* The same type and description again: the same key, updated. */
	EXPECT_TRUE(add_key("user", "k1", "world", 5, ses) == k);
	read_key("updated", k);
	EXPECT(keyctl(KEYCTL_UPDATE, k, (long)"abc", 3, 0), 0);
	read_key("after KEYCTL_UPDATE", k);
	EXPECT_TRUE(keyctl(KEYCTL_SEARCH, ses, (long)"user", (long)"k1", 0) == k);
	EXPECT_ERR(keyctl(KEYCTL_SEARCH, ses, (long)"user", (long)"nope", 0), ENOKEY);
	int ids[8] = {0};
	EXPECT(keyctl(KEYCTL_READ, ses, (long)ids, sizeof ids, 0), 4);
	EXPECT_TRUE(ids[0] == k);

	/* logon keys: a "service:" description, never readable. */
	EXPECT_ERR(add_key("logon", "nocolon", "x", 1, ses), EINVAL);
	long l = add_key("logon", "svc:a", "secret", 6, ses);
	EXPECT_TRUE(l > 0);
	describe("logon key", l);
	read_key("logon key", l);

	/* keyrings: no payload. */
	EXPECT_ERR(add_key("keyring", "kr2", "x", 1, ses), EINVAL);
	long kr = add_key("keyring", "kr", 0, 0, ses);
	EXPECT_TRUE(kr > 0);
	describe("keyring", kr);
	EXPECT(keyctl(KEYCTL_LINK, k, kr, 0, 0), 0);
	EXPECT(keyctl(KEYCTL_READ, kr, (long)ids, sizeof ids, 0), 4);
	EXPECT(keyctl(KEYCTL_UNLINK, k, kr, 0, 0), 0);
	EXPECT_ERR(keyctl(KEYCTL_UNLINK, k, kr, 0, 0), ENOENT);
	EXPECT(keyctl(KEYCTL_LINK, k, kr, 0, 0), 0);
	EXPECT(keyctl(KEYCTL_CLEAR, kr, 0, 0, 0), 0);
	EXPECT(keyctl(KEYCTL_READ, kr, (long)ids, sizeof ids, 0), 0);
	EXPECT_ERR(keyctl(KEYCTL_UPDATE, kr, (long)"x", 1, 0), EOPNOTSUPP);
	/* No keyring inside itself, however deep. */
	EXPECT_ERR(keyctl(KEYCTL_LINK, kr, kr, 0, 0), EDEADLK);
	long inner = add_key("keyring", "inner", 0, 0, kr);
	EXPECT_TRUE(inner > 0);
	EXPECT_ERR(keyctl(KEYCTL_LINK, kr, inner, 0, 0), EDEADLK);
	/* A search goes down into nested keyrings. */
	long deep = add_key("user", "deep", "d", 1, inner);
	EXPECT_TRUE(keyctl(KEYCTL_SEARCH, ses, (long)"user", (long)"deep", 0) == deep);
	EXPECT_ERR(add_key("user", "inkey", "x", 1, k), ENOTDIR);
	EXPECT_ERR(keyctl(KEYCTL_LINK, kr, k, 0, 0), ENOTDIR);

	/* Bad arguments. */
	EXPECT_ERR(add_key("nosuchtype", "d", "x", 1, ses), ENODEV);
	EXPECT_ERR(add_key(".dot", "d", "x", 1, ses), EPERM);
	EXPECT_ERR(add_key("user", "", "x", 1, ses), EINVAL);
	EXPECT_ERR(add_key("user", "d", 0, 0, ses), EINVAL);
	EXPECT_ERR(add_key("user", "d", BADPTR, 4, ses), EFAULT);
	EXPECT_ERR(add_key("user", "d", "x", 1, 0x7ffffff0), ENOKEY);
	EXPECT_ERR(keyctl(KEYCTL_DESCRIBE, 0x7ffffff0, 0, 0, 0), ENOKEY);
	EXPECT_ERR(keyctl(9999, 0, 0, 0, 0), EOPNOTSUPP);

	/* Permissions: a key we may only view. */
	long v = add_key("user", "viewonly", "v", 1, ses);
	EXPECT(keyctl(KEYCTL_SETPERM, v, KEY_POS_VIEW | KEY_USR_VIEW, 0, 0), 0);
	describe("view-only key", v);
	read_key("view-only key", v);
	EXPECT_ERR(keyctl(KEYCTL_SETPERM, v, KEY_POS_ALL, 0, 0), EACCES);

	/* Revoked and invalidated keys. */
	long r = add_key("user", "rev", "r", 1, ses);
	EXPECT(keyctl(KEYCTL_REVOKE, r, 0, 0, 0), 0);
	read_key("revoked key", r);
	long inv = add_key("user", "inv", "i", 1, ses);
	EXPECT(keyctl(KEYCTL_INVALIDATE, inv, 0, 0, 0), 0);
	usleep(100000);
	EXPECT_ERR(keyctl(KEYCTL_SEARCH, ses, (long)"user", (long)"inv", 0), ENOKEY);

	/* request_key finds what the caller's keyrings hold; no upcall. */
	EXPECT_TRUE(syscall(SYS_request_key, "user", "k1", 0, 0) == k);
	EXPECT_ERR(syscall(SYS_request_key, "user", "missing", 0, 0), ENOKEY);

	/* Thread keyrings exist only when asked for. */
	EXPECT_ERR(keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_THREAD_KEYRING, 0, 0, 0), ENOKEY);
	long th = keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_THREAD_KEYRING, 1, 0, 0);
	EXPECT_TRUE(th > 0 && th != ses);
	describe("thread keyring", th);

	/* A named session keyring; joining the name again makes another, as
	 * the first grants no search to its user (only to its possessor). */
	long named = keyctl(KEYCTL_JOIN_SESSION_KEYRING, (long)"ferrovisor-test", 0, 0, 0);
	EXPECT_TRUE(named > 0 && named != ses);
	describe("named session", named);
	long again = keyctl(KEYCTL_JOIN_SESSION_KEYRING, (long)"ferrovisor-test", 0, 0, 0);
	EXPECT_TRUE(again > 0 && again != named);
	EXPECT_TRUE(keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0, 0, 0) == again);

	/* A child shares its parent's session keyring. */
	pid_t c = fork();
	if (c == 0)
		_exit(keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0, 0, 0) == again ? 0 : 1);
	int st;
	waitpid(c, &st, 0);
	SHOW("child's session keyring is the parent's: %s", WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "yes" : "no");
	return t_done();
}
