/* execve starts the new program with the FPU and vector registers in their
 * initial state, whatever the old program left there: x87 control word
 * 0x37f, MXCSR 0x1f80, XMM registers zero. */
#include "t.h"

int main(int argc, char **argv)
{
	if (argc > 1) {
		unsigned mxcsr;
		unsigned short fcw;
		unsigned long long xmm[2];
		__asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
		__asm__ volatile("fnstcw %0" : "=m"(fcw));
		__asm__ volatile("movdqu %%xmm9, %0" : "=m"(xmm));
		printf("child: mxcsr %#x fcw %#x xmm9 zero %s\n", mxcsr, fcw,
		       xmm[0] == 0 && xmm[1] == 0 ? "yes" : "no");
		return 0;
	}
	/* Rounding down, flush to zero, a changed x87 precision, a marked
	 * vector register. */
	unsigned mxcsr = 0x1f80 | 0x2000 | 0x8000;
	unsigned short fcw = 0x027f;
	unsigned long long mark[2] = { 0x1122334455667788ull, 0x99aabbccddeeff00ull };
	__asm__ volatile("ldmxcsr %0" ::"m"(mxcsr));
	__asm__ volatile("fldcw %0" ::"m"(fcw));
	__asm__ volatile("movdqu %0, %%xmm9" ::"m"(mark) : "xmm9");
	unsigned now;
	__asm__ volatile("stmxcsr %0" : "=m"(now));
	printf("parent: mxcsr %#x\n", now);
	char *args[] = { argv[0], "child", NULL };
	execv("/proc/self/exe", args);
	printf("execv: %s\n", errname(errno));
	return 1;
}
