/* What cpuid and xgetbv tell user code of the instruction-set extensions
 * it may use (those glibc and compilers' dispatchers test): the same on
 * every platform as natively. Supervisor features (INVPCID, XSAVES, CET),
 * which a hypervisor may hide and no user code can use, are left out, as
 * are RDPID (hidden by PVM, though the instruction works) and AMX (which a
 * VMM must ask the host for). */
#include "t.h"
#include <cpuid.h>

static unsigned reg(unsigned leaf, unsigned sub, int which)
{
	unsigned r[4] = {0, 0, 0, 0};
	unsigned max = __get_cpuid_max(leaf & 0x80000000u, NULL);
	if (leaf <= max)
		__cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
	return r[which];
}

#define BIT(n) (1u << (n))
enum { EAX, EBX, ECX, EDX };

int main(void)
{
	struct {
		const char *name;
		unsigned leaf, sub;
		int reg;
		unsigned mask;
	} rows[] = {
		{"1.ecx", 1, 0, ECX,
		 BIT(0) | BIT(1) | BIT(9) | BIT(12) | BIT(13) | BIT(19) | BIT(20) | BIT(22) | BIT(23) |
			 BIT(25) | BIT(26) | BIT(27) | BIT(28) | BIT(29) | BIT(30)},
		{"1.edx", 1, 0, EDX, BIT(4) | BIT(15) | BIT(23) | BIT(24) | BIT(25) | BIT(26)},
		{"7.ebx", 7, 0, EBX,
		 BIT(3) | BIT(5) | BIT(8) | BIT(9) | BIT(16) | BIT(17) | BIT(18) | BIT(19) | BIT(21) |
			 BIT(23) | BIT(24) | BIT(28) | BIT(29) | BIT(30) | BIT(31)},
		{"7.ecx", 7, 0, ECX,
		 BIT(1) | BIT(6) | BIT(8) | BIT(9) | BIT(10) | BIT(11) | BIT(12) | BIT(14) | BIT(27) |
			 BIT(28)},
		{"7.edx", 7, 0, EDX, BIT(4) | BIT(8) | BIT(14)},
		{"7.1.eax", 7, 1, EAX, BIT(4) | BIT(5)},
		{"80000001.ecx", 0x80000001, 0, ECX,
		 BIT(0) | BIT(5) | BIT(6) | BIT(8) | BIT(11) | BIT(16) | BIT(21)},
		{"80000001.edx", 0x80000001, 0, EDX, BIT(11) | BIT(20) | BIT(26) | BIT(27) | BIT(29)},
	};
	for (unsigned i = 0; i < sizeof rows / sizeof rows[0]; i++)
		printf("%s %08x\n", rows[i].name, reg(rows[i].leaf, rows[i].sub, rows[i].reg) & rows[i].mask);
	if (reg(1, 0, ECX) & BIT(27)) {
		unsigned lo, hi;
		__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
		/* (without AMX's tile state, bits 17 and 18) */
		printf("xcr0 %08x%08x\n", hi, lo & ~(BIT(17) | BIT(18)));
	}
	return t_done();
}
