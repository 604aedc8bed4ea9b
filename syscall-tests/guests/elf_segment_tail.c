/* The last page of an ELF segment without bss shows the file's bytes past
 * the segment's end, as the kernel maps whole pages of the file; a segment
 * with bss reads zeros from its file end on. Linked so that segments share
 * pages of the file. */
/* link: -Wl,-z,noseparate-code */
#include "t.h"
#include <link.h>

static int checked, tails_match, bss_zero;

static int each(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	int fd = *(int *)data;
	if (info->dlpi_name[0] != '\0') /* the program itself only */
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type != PT_LOAD || !(p->p_flags & PF_R))
			continue;
		uintptr_t end = info->dlpi_addr + p->p_vaddr + p->p_filesz;
		uintptr_t page_end = (end + 4095) & ~(uintptr_t)4095;
		if (end == page_end)
			continue;
		size_t n = page_end - end;
		unsigned char file[4096], mem[4096];
		memcpy(mem, (const void *)end, n);
		if (p->p_memsz > p->p_filesz) {
			int zero = 1;
			for (size_t j = 0; j < n && j < p->p_memsz - p->p_filesz; j++)
				zero &= mem[j] == 0;
			bss_zero += zero;
			continue;
		}
		ssize_t got = pread(fd, file, n, p->p_offset + p->p_filesz);
		if (got < 0)
			continue;
		/* Past the file's end the page reads zeros. */
		memset(file + got, 0, n - got);
		checked++;
		tails_match += memcmp(file, mem, n) == 0;
	}
	return 0;
}

int main(void)
{
	int fd = EXPECT(open("/proc/self/exe", O_RDONLY), 3);
	dl_iterate_phdr(each, &fd);
	EXPECT_TRUE(checked > 0);
	EXPECT(tails_match, checked);
	printf("segments with bss read zeros: %d\n", bss_zero);
	EXPECT(close(fd), 0);
	return t_done();
}
