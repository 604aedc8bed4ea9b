/* System V shared memory: shmget (private and keyed segments, EEXIST,
 * ENOENT, EINVAL), shmat (where, read-only, SHM_RND, the whole last page),
 * shmdt, what fork shares, shmctl (IPC_STAT's fields and attachment count,
 * IPC_SET, IPC_RMID while attached, IPC_INFO, SHM_INFO) and the permission
 * checks of another user. Natively it runs in an IPC namespace of its own
 * (the harness's `sysv_` rule), so the identifiers are a new namespace's,
 * as the sandbox's are. */
#include "sysv.h"
#include <grp.h>
#include <sys/ipc.h>
#include <sys/shm.h>

static struct shmid_ds stat_of(int id)
{
	struct shmid_ds ds;
	memset(&ds, 0, sizeof ds);
	if (shmctl(id, IPC_STAT, &ds) != 0)
		SHOW("IPC_STAT failed: %s", errname(errno));
	return ds;
}

int main(void)
{
	int id = EXPECT(shmget(IPC_PRIVATE, 10000, IPC_CREAT | 0600), 0);
	struct shmid_ds ds = stat_of(id);
	EXPECT(ds.shm_segsz, 10000);
	EXPECT(ds.shm_nattch, 0);
	EXPECT(ds.shm_perm.mode, 0600);
	EXPECT(ds.shm_perm.__key, 0);
	EXPECT_TRUE(ds.shm_cpid == getpid() && ds.shm_lpid == 0);
	EXPECT_TRUE(ds.shm_perm.uid == geteuid() && ds.shm_perm.cuid == geteuid());
	EXPECT_TRUE(ds.shm_atime == 0 && ds.shm_ctime != 0);

	char *p = shmat(id, NULL, 0);
	EXPECT_TRUE(p != (void *)-1);
	/* zeros, up to the end of the last page */
	EXPECT_TRUE(p[0] == 0 && p[9999] == 0 && p[12287] == 0);
	strcpy(p, "hello");
	ds = stat_of(id);
	EXPECT(ds.shm_nattch, 1);
	EXPECT_TRUE(ds.shm_lpid == getpid() && ds.shm_atime != 0);
	char *q = shmat(id, NULL, SHM_RDONLY);
	EXPECT_TRUE(q != (void *)-1 && q != p && !strcmp(q, "hello"));
	EXPECT(stat_of(id).shm_nattch, 2);

	/* fork shares both attachments; the child's store is seen here */
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		t_failures = 0;
		EXPECT(stat_of(id).shm_nattch, 4);
		p[0] = 'J';
		EXPECT(shmdt(q), 0);
		EXPECT(stat_of(id).shm_nattch, 3);
		fflush(stdout);
		_exit(t_failures);
	}
	int st = -1;
	EXPECT_TRUE(waitpid(c, &st, 0) == c);
	EXPECT(st, 0);
	EXPECT_TRUE(!strcmp(q, "Jello"));
	EXPECT(stat_of(id).shm_nattch, 2);

	/* a store through the read-only attachment faults */
	fflush(stdout);
	c = fork();
	if (c == 0) {
		q[0] = 'x';
		_exit(0);
	}
	EXPECT_TRUE(waitpid(c, &st, 0) == c);
	EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);

	/* detaching: only at an attachment's start */
	EXPECT_ERR(shmdt(p + 4096), EINVAL);
	EXPECT_ERR(shmdt(p + 1), EINVAL);
	char *anon = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	EXPECT_ERR(shmdt(anon), EINVAL);
	munmap(anon, 4096);
	/* where: unaligned without SHM_RND, and with it */
	char *want = (char *)0x7f1234567000;
	EXPECT_TRUE(shmat(id, want + 5, 0) == (void *)-1 && errno == EINVAL);
	char *r = shmat(id, want + 5, SHM_RND);
	EXPECT_TRUE(r == want && !strcmp(r, "Jello"));
	/* over an existing mapping: EINVAL, unless SHM_REMAP */
	EXPECT_TRUE(shmat(id, want, 0) == (void *)-1 && errno == EINVAL);
	EXPECT_TRUE(shmat(id, want, SHM_REMAP) == want);
	EXPECT(stat_of(id).shm_nattch, 3);
	EXPECT(shmdt(want), 0);
	EXPECT_TRUE(shmat(12345, NULL, 0) == (void *)-1 && errno == EINVAL);

	/* removed while attached: keyless, marked, still there until the
	 * last detach */
	EXPECT(shmctl(id, IPC_RMID, NULL), 0);
	ds = stat_of(id);
	EXPECT_TRUE((ds.shm_perm.mode & 01000) != 0);
	EXPECT(ds.shm_nattch, 2);
	EXPECT(shmdt(q), 0);
	EXPECT_TRUE(!strcmp(p, "Jello"));
	EXPECT(shmdt(p), 0);
	struct shmid_ds gone;
	EXPECT_ERR(shmctl(id, IPC_STAT, &gone), EINVAL);

	/* keyed segments */
	key_t k = 0x5eed;
	int a = EXPECT(shmget(k, 4096, IPC_CREAT | IPC_EXCL | 0640), 1);
	EXPECT_ERR(shmget(k, 4096, IPC_CREAT | IPC_EXCL | 0640), EEXIST);
	EXPECT_ERR(shmget(k, 8192, 0), EINVAL);
	EXPECT(shmget(k, 0, 0), a);
	EXPECT(shmget(k, 100, IPC_CREAT), a);
	EXPECT_ERR(shmget(0x4321, 4096, 0), ENOENT);
	EXPECT_ERR(shmget(IPC_PRIVATE, 0, IPC_CREAT), EINVAL);
	EXPECT(stat_of(a).shm_perm.__key, 0x5eed);
	ds = stat_of(a);
	ds.shm_perm.mode = 0604;
	EXPECT(shmctl(a, IPC_SET, &ds), 0);
	EXPECT(stat_of(a).shm_perm.mode, 0604);

	/* /proc/sysvipc/shm, as ipcs reads it: the header, and a line per
	 * segment */
	char *m = shmat(a, NULL, 0);
	EXPECT_TRUE(m != (void *)-1);
	m[0] = 1;
	const char *rows = sysvipc_table("shm");
	int key, sid, cpid, lpid;
	unsigned perms, uid;
	unsigned long size, nattch, rss;
	EXPECT(sscanf(rows, "%d %d %o %lu %d %d %lu %u %*u %*u %*u %*u %*u %*u %lu", &key,
		      &sid, &perms, &size, &cpid, &lpid, &nattch, &uid, &rss),
	       9);
	EXPECT_TRUE(key == 0x5eed && sid == a && perms == 0604 && size == 4096 && nattch == 1);
	EXPECT_TRUE(cpid == getpid() && lpid == getpid() && uid == 0 && rss == 4096);
	/* (no semaphore set or message queue here) */
	EXPECT_TRUE(!*sysvipc_table("sem"));
	EXPECT_TRUE(!*sysvipc_table("msg"));
	EXPECT(shmdt(m), 0);

	/* another user: read allowed by 0604, writing not; no removal */
	fflush(stdout);
	c = fork();
	if (c == 0) {
		t_failures = 0;
		EXPECT(setgroups(0, NULL), 0);
		EXPECT(setresgid(1000, 1000, 1000), 0);
		EXPECT(setresuid(1000, 1000, 1000), 0);
		EXPECT(shmget(k, 0, 0), a);
		EXPECT_ERR(shmget(k, 0, 0600), EACCES);
		EXPECT_TRUE(shmat(a, NULL, 0) == (void *)-1 && errno == EACCES);
		void *ro = shmat(a, NULL, SHM_RDONLY);
		EXPECT_TRUE(ro != (void *)-1);
		EXPECT_ERR(shmctl(a, IPC_RMID, NULL), EPERM);
		EXPECT_ERR(shmctl(a, IPC_SET, &ds), EPERM);
		fflush(stdout);
		_exit(t_failures);
	}
	EXPECT_TRUE(waitpid(c, &st, 0) == c);
	EXPECT(st, 0);
	/* (the child's attachment went with it) */
	EXPECT(stat_of(a).shm_nattch, 0);

	struct shminfo info;
	EXPECT_TRUE(shmctl(0, IPC_INFO, (struct shmid_ds *)&info) >= 0);
	EXPECT_TRUE(info.shmmni == 4096 && info.shmmin == 1 && info.shmmax == ~0UL - (1UL << 24));
	struct shm_info si;
	EXPECT_TRUE(shmctl(0, SHM_INFO, (struct shmid_ds *)&si) >= 0);
	EXPECT(si.used_ids, 1);
	EXPECT(shmctl(a, IPC_RMID, NULL), 0);
	EXPECT_ERR(shmget(k, 0, 0), ENOENT);
	EXPECT(shmget(IPC_PRIVATE, 1, 0600), 2);
	return t_done();
}
