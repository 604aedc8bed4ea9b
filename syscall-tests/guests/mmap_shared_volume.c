/* MAP_SHARED mappings of files in a writable directory (argv[1]; in the
 * sandbox a volume, a host directory mounted into it): stores through a
 * mapping are seen by read(2) and write(2)s through the mapping, other
 * descriptions and fork children share the pages, truncation shows, and
 * everything reaches the file (the harness compares the files left in the
 * directory by both runs, so what is written back at munmap, msync and
 * exit counts too). */
#include "t.h"

static char *in(const char *dir, const char *name)
{
	static char paths[4][4096];
	static int next;
	char *p = paths[next++ % 4];
	snprintf(p, 4096, "%s/%s", dir, name);
	return p;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		printf("usage: mmap_shared_volume DIR\n");
		return 2;
	}
	const char *dir = argv[1];
	long pg = 4096;
	char buf[64] = {0};

	char *shared = in(dir, "shared");
	int fd = EXPECT(open(shared, O_RDWR | O_CREAT | O_TRUNC, 0644), 3);
	EXPECT(ftruncate(fd, 3 * pg), 0);
	char *m = EXPECT_MAP(mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));

	/* Stores through the mapping are what read(2) returns. */
	memcpy(m + 10, "through the map", 15);
	EXPECT(pread(fd, buf, 15, 10), 15);
	EXPECT_TRUE(memcmp(buf, "through the map", 15) == 0);
	/* write(2)s show in the mapping; bytes beside them stay. */
	m[pg + 4] = 'A';
	m[pg + 13] = 'B';
	EXPECT(lseek(fd, pg + 5, SEEK_SET), pg + 5);
	EXPECT(write(fd, "12345678", 8), 8);
	EXPECT_TRUE(memcmp(m + pg + 4, "A12345678B", 10) == 0);
	EXPECT(pwrite(fd, "pwritten", 8, 2 * pg - 4), 8);
	EXPECT_TRUE(memcmp(m + 2 * pg - 4, "pwritten", 8) == 0);
	/* read(2) into the mapping of the very file it reads. */
	EXPECT(pread(fd, m + 2 * pg + 20, 15, 10), 15);
	EXPECT_TRUE(memcmp(m + 2 * pg + 20, "through the map", 15) == 0);
	/* write(2) from it. */
	EXPECT(pwrite(fd, m + 10, 7, 2 * pg + 40), 7);
	EXPECT_TRUE(memcmp(m + 2 * pg + 40, "through", 7) == 0);

	/* A second open of the file maps the same pages. */
	int fd2 = EXPECT(open(shared, O_RDWR), 4);
	char *m2 = EXPECT_MAP(mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd2, pg));
	EXPECT_TRUE(memcmp(m2 + 5, "12345678", 8) == 0);
	m2[100] = 'x';
	EXPECT(m[pg + 100], 'x');
	/* A read-only description maps them too, and may not write them. */
	int fd3 = EXPECT(open(shared, O_RDONLY), 5);
	char *r = EXPECT_MAP(mmap(NULL, 3 * pg, PROT_READ, MAP_SHARED, fd3, 0));
	m[0] = 'Z';
	EXPECT(r[0], 'Z');
	EXPECT_ERR(mprotect(r, pg, PROT_READ | PROT_WRITE), EACCES);
	EXPECT_MAP_ERR(mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd3, 0), EACCES);
	/* A private mapping starts from what the shared ones hold, and its
	 * stores stay its own. */
	char *priv = EXPECT_MAP(mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd3, 0));
	EXPECT_TRUE(memcmp(priv + 10, "through the map", 15) == 0);
	priv[11] = '!';
	EXPECT(m[11], 'h');

	/* A fork child's stores and writes are the parent's. */
	pid_t pid = fork();
	if (pid == 0) {
		m[200] = 'c';
		if (pwrite(fd, "child", 5, 300) != 5)
			_exit(1);
		m2[200] = 'd';
		_exit(0);
	}
	int status = 0;
	EXPECT(waitpid(pid, &status, 0) == pid, 1);
	EXPECT(status, 0);
	EXPECT(m[200], 'c');
	EXPECT_TRUE(memcmp(m + 300, "child", 5) == 0);
	EXPECT(m[pg + 200], 'd');

	/* msync: flags as Linux checks them. */
	EXPECT(msync(m, 3 * pg, MS_SYNC), 0);
	EXPECT(msync(m, pg, MS_ASYNC), 0);
	EXPECT_ERR(msync(m, pg, MS_SYNC | MS_ASYNC), EINVAL);
	EXPECT_ERR(msync(m + 1, pg, MS_SYNC), EINVAL);

	/* Truncation: what lay past the new end reads as zeros when the file
	 * grows again; what lies before it stays. */
	m[2 * pg + 100] = 'q';
	EXPECT(ftruncate(fd, 2 * pg), 0);
	EXPECT(ftruncate(fd, 3 * pg), 0);
	EXPECT(m[2 * pg + 100], 0);
	EXPECT(m[2 * pg + 20], 0);
	EXPECT_TRUE(memcmp(m + 2 * pg - 4, "pwritten", 4) == 0);
	EXPECT(pread(fd, buf, 4, 2 * pg), 4);
	EXPECT_TRUE(memcmp(buf, "\0\0\0\0", 4) == 0);

	/* Stores after the msync reach the file by munmap. */
	memcpy(m + 2 * pg + 50, "after msync", 11);
	EXPECT(munmap(m2, pg), 0);
	EXPECT(munmap(r, 3 * pg), 0);
	EXPECT(munmap(priv, pg), 0);
	EXPECT(munmap(m, 3 * pg), 0);
	int fd4 = EXPECT(open(shared, O_RDONLY), 6);
	EXPECT(pread(fd4, buf, 11, 2 * pg + 50), 11);
	EXPECT_TRUE(memcmp(buf, "after msync", 11) == 0);
	struct stat st;
	EXPECT(fstat(fd4, &st), 0);
	EXPECT(st.st_size, 3 * pg);
	EXPECT(close(fd4), 0);
	EXPECT(close(fd3), 0);
	EXPECT(close(fd2), 0);
	EXPECT(close(fd), 0);

	/* A file mapped in two pieces, one growing past the other: the
	 * pieces stay one file. */
	int g = EXPECT(open(in(dir, "grown"), O_RDWR | O_CREAT | O_TRUNC, 0600), 3);
	EXPECT(ftruncate(g, pg), 0);
	char *g1 = EXPECT_MAP(mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED, g, 0));
	g1[1] = '1';
	EXPECT(pwrite(g, "", 1, 3 * pg - 1), 1);
	char *g2 = EXPECT_MAP(mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, g, 0));
	EXPECT(g2[1], '1');
	g2[2 * pg] = '2';
	g1[2] = '3';
	EXPECT(g2[2], '3');
	EXPECT(pread(g, buf, 1, 2 * pg), 1);
	EXPECT(buf[0], '2');
	/* mremap grows a mapping over more of the same pages. */
	char *g4 = EXPECT_MAP(mremap(g1, pg, 3 * pg, MREMAP_MAYMOVE));
	EXPECT(g4[2], '3');
	EXPECT(g4[2 * pg], '2');
	g4[2 * pg + 1] = '4';
	EXPECT(g2[2 * pg + 1], '4');
	/* O_TRUNC empties the mappings as well. */
	int g3 = EXPECT(open(in(dir, "grown"), O_RDWR | O_TRUNC), 4);
	EXPECT(ftruncate(g3, 2 * pg), 0);
	EXPECT(g4[1], 0);
	EXPECT(g2[pg], 0);
	g2[pg + 1] = 'e';
	EXPECT(close(g3), 0);
	EXPECT(close(g), 0);
	/* Still mapped at exit: written back all the same. */
	memcpy(g2 + 7, "left mapped at exit", 19);
	return t_done();
}
