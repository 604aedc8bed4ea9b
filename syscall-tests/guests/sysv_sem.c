/* System V semaphores: semget (private and keyed sets), semctl (GETVAL,
 * SETVAL, GETALL, SETALL, GETPID, GETNCNT, GETZCNT, IPC_STAT, IPC_RMID),
 * semop's all-or-nothing operations, waits for a value to grow or to be
 * zero, semtimedop's timeout, a signal ending a wait with EINTR, removal
 * ending it with EIDRM, SEM_UNDO at exit, the errnos, another user's
 * access and /proc/sysvipc/sem. Natively it runs in an IPC namespace of its
 * own (the harness's `sysv_` rule). */
#include "sysv.h"
#include <grp.h>
#include <sys/ipc.h>
#include <sys/sem.h>

union semun {
	int val;
	struct semid_ds *buf;
	unsigned short *array;
};

static int op(int id, unsigned short num, short delta, short flg)
{
	struct sembuf b = {num, delta, flg};
	return semop(id, &b, 1);
}

static void on_usr1(int sig)
{
	(void)sig;
}

/* Forks a child that runs `semop(id, {num, delta, 0})` and exits with
 * the errno it got (0 on success). */
static pid_t blocked(int id, unsigned short num, short delta)
{
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		int r = op(id, num, delta, 0);
		_exit(r == 0 ? 0 : errno);
	}
	return c;
}

/* Waits (up to 10 s) until one process waits on semaphore `num` (`cmd`:
 * GETNCNT or GETZCNT), so that the next step finds it blocked. */
static void settle(int id, int num, int cmd)
{
	for (int i = 0; i < 1000 && semctl(id, num, cmd) < 1; i++)
		usleep(10000);
}

int main(void)
{
	int id = EXPECT(semget(IPC_PRIVATE, 3, IPC_CREAT | 0600), 0);
	struct semid_ds ds;
	union semun u = {.buf = &ds};
	EXPECT(semctl(id, 0, IPC_STAT, u), 0);
	EXPECT(ds.sem_nsems, 3);
	EXPECT(ds.sem_perm.mode, 0600);
	EXPECT_TRUE(ds.sem_otime == 0 && ds.sem_ctime != 0);
	EXPECT(semctl(id, 1, GETVAL), 0);
	EXPECT(semctl(id, 1, SETVAL, (union semun){.val = 5}), 0);
	EXPECT(semctl(id, 1, GETVAL), 5);
	EXPECT_TRUE(semctl(id, 1, GETPID) == getpid());
	unsigned short all[3] = {1, 2, 3};
	EXPECT(semctl(id, 0, SETALL, (union semun){.array = all}), 0);
	unsigned short back[3] = {0};
	EXPECT(semctl(id, 0, GETALL, (union semun){.array = back}), 0);
	EXPECT_TRUE(back[0] == 1 && back[1] == 2 && back[2] == 3);
	EXPECT_ERR(semctl(id, 0, SETVAL, (union semun){.val = 40000}), ERANGE);
	EXPECT_ERR(semctl(id, 7, GETVAL), EINVAL);

	/* all or nothing */
	struct sembuf two[2] = {{0, -1, IPC_NOWAIT}, {1, -5, IPC_NOWAIT}};
	EXPECT_ERR(semop(id, two, 2), EAGAIN);
	EXPECT(semctl(id, 0, GETVAL), 1);
	two[1].sem_op = -2;
	EXPECT(semop(id, two, 2), 0);
	EXPECT(semctl(id, 0, GETVAL), 0);
	EXPECT(semctl(id, 1, GETVAL), 0);
	EXPECT_ERR(op(id, 0, -1, IPC_NOWAIT), EAGAIN);
	EXPECT_ERR(op(id, 2, 0, IPC_NOWAIT), EAGAIN);
	EXPECT_ERR(op(id, 5, 1, 0), EFBIG);
	EXPECT_ERR(semop(id, two, 0), EINVAL);
	static struct sembuf many[501];
	EXPECT_ERR(semop(id, many, 501), E2BIG);
	EXPECT_ERR(op(id, 2, 32767, 0), ERANGE);

	/* a wait for the value to grow, counted in GETNCNT */
	pid_t c = blocked(id, 0, -1);
	settle(id, 0, GETNCNT);
	EXPECT(semctl(id, 0, GETNCNT), 1);
	EXPECT(op(id, 0, 1, 0), 0);
	EXPECT(exit_code(c), 0);
	EXPECT(semctl(id, 0, GETNCNT), 0);
	EXPECT(semctl(id, 0, GETVAL), 0);
	EXPECT_TRUE(semctl(id, 0, GETPID) == c);
	/* a wait for zero, counted in GETZCNT */
	c = blocked(id, 2, 0);
	settle(id, 2, GETZCNT);
	EXPECT(semctl(id, 2, GETZCNT), 1);
	EXPECT(op(id, 2, -3, 0), 0);
	EXPECT(exit_code(c), 0);
	/* semtimedop's timeout */
	struct sembuf one = {0, -1, 0};
	struct timespec ts = {0, 50000000};
	EXPECT_ERR(semtimedop(id, &one, 1, &ts), EAGAIN);
	ts.tv_nsec = 2000000000;
	EXPECT_ERR(semtimedop(id, &one, 1, &ts), EINVAL);

	/* a signal ends a wait with EINTR, even under SA_RESTART */
	fflush(stdout);
	c = fork();
	if (c == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_usr1;
		sa.sa_flags = SA_RESTART;
		sigaction(SIGUSR1, &sa, NULL);
		int r = op(id, 0, -1, 0);
		_exit(r == 0 ? 0 : errno);
	}
	settle(id, 0, GETNCNT);
	kill(c, SIGUSR1);
	EXPECT(exit_code(c), EINTR);
	EXPECT(semctl(id, 0, GETNCNT), 0);

	/* SEM_UNDO: what an exiting process did is undone */
	fflush(stdout);
	c = fork();
	if (c == 0) {
		op(id, 1, 2, SEM_UNDO);
		op(id, 1, -1, SEM_UNDO);
		_exit(semctl(id, 1, GETVAL));
	}
	EXPECT(exit_code(c), 1);
	EXPECT(semctl(id, 1, GETVAL), 0);

	/* removal ends a wait with EIDRM */
	c = blocked(id, 0, -1);
	settle(id, 0, GETNCNT);
	EXPECT(semctl(id, 0, IPC_RMID), 0);
	EXPECT(exit_code(c), EIDRM);
	EXPECT_ERR(semctl(id, 0, GETVAL), EINVAL);
	EXPECT_ERR(op(id, 0, 1, 0), EINVAL);

	/* keyed sets, and another user */
	key_t k = 0x5e4a;
	int a = EXPECT(semget(k, 2, IPC_CREAT | IPC_EXCL | 0640), 1);
	EXPECT_ERR(semget(k, 2, IPC_CREAT | IPC_EXCL), EEXIST);
	EXPECT_ERR(semget(k, 5, 0), EINVAL);
	EXPECT(semget(k, 0, 0), a);
	EXPECT_ERR(semget(0x4321, 1, 0), ENOENT);
	EXPECT_ERR(semget(IPC_PRIVATE, 0, IPC_CREAT), EINVAL);
	fflush(stdout);
	c = fork();
	if (c == 0) {
		t_failures = 0;
		EXPECT(setgroups(0, NULL), 0);
		EXPECT(setresgid(1000, 1000, 1000), 0);
		EXPECT(setresuid(1000, 1000, 1000), 0);
		EXPECT_ERR(op(a, 0, 1, 0), EACCES);
		EXPECT_ERR(semctl(a, 0, GETVAL), EACCES);
		EXPECT_ERR(semctl(a, 0, IPC_RMID), EPERM);
		fflush(stdout);
		_exit(t_failures);
	}
	EXPECT(exit_code(c), 0);

	const char *rows = sysvipc_table("sem");
	int key, sid;
	unsigned perms;
	unsigned long nsems;
	EXPECT(sscanf(rows, "%d %d %o %lu", &key, &sid, &perms, &nsems), 4);
	EXPECT_TRUE(key == 0x5e4a && sid == a && perms == 0640 && nsems == 2);
	EXPECT(semctl(a, 0, IPC_RMID), 0);
	return t_done();
}
