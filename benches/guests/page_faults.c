/*
 * page_faults N: maps N fresh anonymous pages, writes one byte to each (a
 * first-touch fault apiece), unmaps them; prints the touching's duration
 * in nanoseconds.
 *
 * What a program's start, a heap's growth and a fork's copies cost: on
 * the KVM platform each is a page-table walk of the guest's tables by KVM
 * (a shadow fault on PVM), on the others the host kernel's fault path.
 */
#include <sys/mman.h>

#include "guest_common.h"

int main(int argc, char **argv)
{
	uint64_t n = parse_iterations(argc, argv);
	size_t len = (size_t)n * 4096;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	uint64_t start = now_ns();
	for (uint64_t i = 0; i < n; i++)
		p[i * 4096] = 1;
	uint64_t end = now_ns();
	munmap(p, len);
	report_ns(start, end);
	return 0;
}
