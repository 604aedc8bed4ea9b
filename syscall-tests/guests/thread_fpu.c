/* A thread's vector registers are its own: one that ends leaves nothing
 * a later thread (made by a thread that never saw it) can read. On KVM a
 * new thread may get the vCPU an ended one had. */
#include "t.h"
#include <pthread.h>

static const unsigned long long mark[2] = {0x1122334455667788ull, 0x99aabbccddeeff00ull};

static void *marker(void *arg)
{
	(void)arg;
	__asm__ volatile("movdqu %0, %%xmm9\n\tmovdqu %0, %%xmm14" ::"m"(mark) : "xmm9", "xmm14");
	return NULL;
}

static void *reader(void *arg)
{
	unsigned long long a[2], b[2];
	__asm__ volatile("movdqu %%xmm9, %0\n\tmovdqu %%xmm14, %1" : "=m"(a), "=m"(b));
	*(int *)arg = (a[0] == mark[0] && a[1] == mark[1]) || (b[0] == mark[0] && b[1] == mark[1]);
	return NULL;
}

int main(void)
{
	int seen = 0;
	for (int round = 0; round < 8; round++) {
		pthread_t t;
		EXPECT(pthread_create(&t, NULL, marker, NULL), 0);
		EXPECT(pthread_join(t, NULL), 0);
		int leaked = 0;
		EXPECT(pthread_create(&t, NULL, reader, &leaked), 0);
		EXPECT(pthread_join(t, NULL), 0);
		seen |= leaked;
	}
	EXPECT(seen, 0);
	return t_done();
}
