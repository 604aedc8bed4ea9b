/* System V message queues: msgget (private and keyed), msgsnd and msgrcv
 * (types: first, by type, MSG_EXCEPT, the lowest type up to a bound;
 * IPC_NOWAIT, MSG_NOERROR, E2BIG), a full queue and a waiting sender, a
 * waiting receiver woken by a message, by a signal (EINTR) and by removal
 * (EIDRM), msgctl (IPC_STAT's counts, IPC_SET of msg_qbytes, IPC_RMID), another user's access and /proc/sysvipc/msg.
 * Natively it runs in an IPC namespace of its own (the `sysv_` rule). */
#include "sysv.h"
#include <grp.h>
#include <sys/ipc.h>
#include <sys/msg.h>

struct m {
	long type;
	char text[64];
};

static int snd(int id, long type, const char *text, int flg)
{
	struct m b = {type, {0}};
	strcpy(b.text, text);
	return msgsnd(id, &b, strlen(text) + 1, flg);
}

/* Receives one message: prints its type and text, returns msgrcv's. */
static long rcv(int id, long type, size_t size, int flg)
{
	struct m b;
	memset(&b, 0, sizeof b);
	long n = msgrcv(id, &b, size, type, flg);
	if (n >= 0)
		SHOW("got type %ld \"%.*s\" (%ld bytes)", b.type, (int)n, b.text, n);
	return n;
}

static void on_usr1(int sig)
{
	(void)sig;
}

/* A child that waits in msgrcv for `type`, exiting with its errno (0 when
 * it got a message). */
static pid_t receiver(int id, long type)
{
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_usr1;
		sa.sa_flags = SA_RESTART;
		sigaction(SIGUSR1, &sa, NULL);
		struct m b;
		_exit(msgrcv(id, &b, sizeof b.text, type, 0) >= 0 ? 0 : errno);
	}
	return c;
}

/* Lets a child reach its wait (no count of waiters to poll here). */
static void settle(void)
{
	usleep(300000);
}

int main(void)
{
	int id = EXPECT(msgget(IPC_PRIVATE, IPC_CREAT | 0600), 0);
	struct msqid_ds ds;
	EXPECT(msgctl(id, IPC_STAT, &ds), 0);
	EXPECT(ds.msg_qnum, 0);
	EXPECT(ds.msg_qbytes, 16384);
	EXPECT(ds.msg_perm.mode, 0600);
	EXPECT(snd(id, 3, "three", 0), 0);
	EXPECT(snd(id, 1, "one", 0), 0);
	EXPECT(snd(id, 2, "two", 0), 0);
	EXPECT(snd(id, 1, "uno", 0), 0);
	EXPECT(msgctl(id, IPC_STAT, &ds), 0);
	EXPECT(ds.msg_qnum, 4);
	EXPECT(ds.__msg_cbytes, 18);
	EXPECT_TRUE(ds.msg_lspid == getpid() && ds.msg_lrpid == 0);
	EXPECT(rcv(id, 1, 64, 0), 4);
	EXPECT(rcv(id, 1, 64, MSG_EXCEPT), 6);
	EXPECT(rcv(id, -3, 64, 0), 4);
	EXPECT_ERR(rcv(id, 2, 2, 0), E2BIG);
	EXPECT(rcv(id, 2, 2, MSG_NOERROR), 2);
	EXPECT_ERR(rcv(id, 0, 64, IPC_NOWAIT), ENOMSG);
	EXPECT_ERR(snd(id, 0, "bad", 0), EINVAL);
	EXPECT_ERR(msgsnd(id, &ds, 9000, 0), EINVAL);
	EXPECT_ERR(rcv(id, 0, (size_t)-1, IPC_NOWAIT), EINVAL);

	/* a full queue: IPC_NOWAIT gives EAGAIN, a sender waits for room */
	ds.msg_qbytes = 10;
	EXPECT(msgctl(id, IPC_SET, &ds), 0);
	EXPECT(snd(id, 1, "123456789", 0), 0);
	EXPECT_ERR(snd(id, 1, "x", IPC_NOWAIT), EAGAIN);
	fflush(stdout);
	pid_t c = fork();
	if (c == 0)
		_exit(snd(id, 2, "later", 0) == 0 ? 0 : errno);
	settle();
	EXPECT(rcv(id, 0, 64, 0), 10);
	EXPECT(exit_code(c), 0);
	EXPECT(rcv(id, 0, 64, 0), 6);
	ds.msg_qbytes = 16384;
	EXPECT(msgctl(id, IPC_SET, &ds), 0);

	/* a waiting receiver: woken by its type only */
	c = receiver(id, 7);
	settle();
	EXPECT(snd(id, 6, "not yet", 0), 0);
	EXPECT(snd(id, 7, "now", 0), 0);
	EXPECT(exit_code(c), 0);
	EXPECT(rcv(id, 0, 64, IPC_NOWAIT), 8);
	/* by a signal: EINTR even under SA_RESTART (signalled until it ends,
	 * in case the first signal came before its wait) */
	c = receiver(id, 9);
	settle();
	int st = -1;
	for (int i = 0; i < 100 && waitpid(c, &st, WNOHANG) == 0; i++) {
		kill(c, SIGUSR1);
		usleep(100000);
	}
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == EINTR);
	/* by removal: EIDRM (a removal before the wait began would be EINVAL:
	 * the child gets a whole second to begin it) */
	c = receiver(id, 9);
	settle();
	usleep(700000);
	EXPECT(msgctl(id, IPC_RMID, NULL), 0);
	EXPECT(exit_code(c), EIDRM);
	EXPECT_ERR(msgctl(id, IPC_STAT, &ds), EINVAL);
	EXPECT_ERR(snd(id, 1, "gone", 0), EINVAL);

	/* keyed queues, and another user */
	key_t k = 0x6d51;
	int a = EXPECT(msgget(k, IPC_CREAT | IPC_EXCL | 0640), 1);
	EXPECT_ERR(msgget(k, IPC_CREAT | IPC_EXCL), EEXIST);
	EXPECT(msgget(k, 0), a);
	EXPECT_ERR(msgget(0x4321, 0), ENOENT);
	EXPECT(snd(a, 5, "kept", 0), 0);
	fflush(stdout);
	c = fork();
	if (c == 0) {
		t_failures = 0;
		EXPECT(setgroups(0, NULL), 0);
		EXPECT(setresgid(1000, 1000, 1000), 0);
		EXPECT(setresuid(1000, 1000, 1000), 0);
		EXPECT_ERR(snd(a, 1, "no", 0), EACCES);
		EXPECT_ERR(rcv(a, 0, 64, IPC_NOWAIT), EACCES);
		EXPECT_ERR(msgctl(a, IPC_RMID, NULL), EPERM);
		fflush(stdout);
		_exit(t_failures);
	}
	EXPECT(exit_code(c), 0);
	/* (raising msg_qbytes past the default needs CAP_SYS_RESOURCE, which
	 * the native run here may lack: only a smaller size is tried) */
	EXPECT(msgctl(a, IPC_STAT, &ds), 0);
	ds.msg_qbytes = 12000;
	EXPECT(msgctl(a, IPC_SET, &ds), 0);

	const char *rows = sysvipc_table("msg");
	int key, qid;
	unsigned perms;
	unsigned long cbytes, qnum;
	EXPECT(sscanf(rows, "%d %d %o %lu %lu", &key, &qid, &perms, &cbytes, &qnum), 5);
	EXPECT_TRUE(key == 0x6d51 && qid == a && perms == 0640 && cbytes == 5 && qnum == 1);
	EXPECT(msgctl(a, IPC_RMID, NULL), 0);
	return t_done();
}
