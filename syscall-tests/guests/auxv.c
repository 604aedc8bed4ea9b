/* What the loader put on the stack: argv, envp, auxiliary vector. */
#include "t.h"
#include <elf.h>
#include <sys/auxv.h>

extern char **environ;

int main(int argc, char **argv)
{
	SHOW("argc=%d", argc);
	for (int i = 0; i < argc; i++)
		SHOW("argv[%d]=%s", i, argv[i]);
	EXPECT_TRUE(argv[argc] == NULL);
	/* The harness gives both runs the same, sorted environment. */
	for (char **e = environ; *e; e++)
		SHOW("env %s", *e);
	EXPECT(getauxval(AT_PAGESZ), 4096);
	EXPECT(getauxval(AT_PHENT), sizeof(Elf64_Phdr));
	EXPECT(getauxval(AT_CLKTCK), 100);
	EXPECT(getauxval(AT_SECURE), 0);
	EXPECT_TRUE(getauxval(AT_UID) == getuid() && getauxval(AT_EUID) == geteuid());
	EXPECT_TRUE(getauxval(AT_GID) == getgid() && getauxval(AT_EGID) == getegid());
	EXPECT_TRUE(getauxval(AT_ENTRY) != 0);
	EXPECT_TRUE(getauxval(AT_PHDR) != 0);
	EXPECT_TRUE(getauxval(AT_PHNUM) > 0);
	/* A static binary has no interpreter. */
	EXPECT(getauxval(AT_BASE), 0);
	EXPECT_TRUE(getauxval(AT_RANDOM) != 0);
	const char *platform = (const char *)getauxval(AT_PLATFORM);
	SHOW("platform=%s", platform ? platform : "(none)");
	const char *execfn = (const char *)getauxval(AT_EXECFN);
	EXPECT_TRUE(execfn && !strcmp(execfn, argv[0]));
	EXPECT_TRUE(getauxval(AT_SYSINFO_EHDR) != 0);
	/* The stack pointer region is writable and the top is above argv. */
	char local;
	EXPECT_TRUE((uintptr_t)&local < (uintptr_t)argv[0]);
	return t_done();
}
