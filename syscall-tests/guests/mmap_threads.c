/* Threads mapping and unmapping at once without MAP_FIXED: each mapping
 * gets a range of its own (the address is chosen and the mapping made in
 * one step, as under Linux's mmap_lock), so every page keeps what its
 * owner wrote (anonymous) or what the file holds (shared file mapping);
 * no thread ever sees another's pages. */
#include "t.h"
#include <pthread.h>
#include <stdatomic.h>

/* link: -lpthread */

#define PG 4096UL
#define SLOTS 64
#define FILE_PAGES 32

static atomic_long bad;
static int fd;

static void *run(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	uint64_t id = (uint64_t)(uintptr_t)arg << 56;
	char *addr[SLOTS] = {0};
	size_t len[SLOTS];
	int file[SLOTS];
	for (int op = 0; op < 20000; op++) {
		int s = rand_r(&seed) % SLOTS;
		if (addr[s]) {
			for (size_t o = 0; o < len[s]; o += PG) {
				uint64_t v = *(volatile uint64_t *)(addr[s] + o);
				uint64_t want = file[s] ? o / PG : (id | (uintptr_t)(addr[s] + o));
				if (v != want)
					bad++;
			}
			if (munmap(addr[s], len[s]))
				bad++;
			addr[s] = 0;
			continue;
		}
		file[s] = rand_r(&seed) % 3 == 0;
		len[s] = PG * (1 + rand_r(&seed) % FILE_PAGES);
		addr[s] = file[s] ? mmap(NULL, len[s], PROT_READ, MAP_SHARED, fd, 0)
				  : mmap(NULL, len[s], PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (addr[s] == MAP_FAILED) {
			bad++;
			addr[s] = 0;
			continue;
		}
		if (!file[s])
			for (size_t o = 0; o < len[s]; o += PG)
				*(uint64_t *)(addr[s] + o) = id | (uintptr_t)(addr[s] + o);
	}
	for (int s = 0; s < SLOTS; s++)
		if (addr[s])
			munmap(addr[s], len[s]);
	return NULL;
}

int main(void)
{
	char path[] = "/tmp/mmap_threads_XXXXXX";
	fd = EXPECT_OK(mkstemp(path));
	EXPECT(unlink(path), 0);
	static char page[PG];
	for (uint64_t i = 0; i < FILE_PAGES; i++) {
		memcpy(page, &i, sizeof i);
		if (write(fd, page, PG) != (ssize_t)PG)
			bad++;
	}
	pthread_t t[4];
	for (long i = 0; i < 4; i++)
		EXPECT_RC(pthread_create(&t[i], NULL, run, (void *)(i + 1)), 0);
	for (int i = 0; i < 4; i++)
		EXPECT_RC(pthread_join(t[i], NULL), 0);
	EXPECT(bad, 0);
	return t_done();
}
