/* Packet mode on a pty master (ioctl_tty(2) TIOCPKT, TIOCGPKT): each master
 * read begins with a control byte, TIOCPKT_DATA before data, or a status
 * byte alone when the slave's state changed: its queues flushed (TCFLSH,
 * TCSAFLUSH, an ISIG character), its output stopped or started (^S/^Q,
 * tcflow), its ^S/^Q flow control switched on or off, its termios changed
 * under EXTPROC. Natively the slave's line discipline runs after a master
 * write returns, so every read waits with poll first. */
#include "t.h"
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>

#ifndef EXTPROC
#define EXTPROC 0200000
#endif

static int m, s;

/* Waits up to 5 s for the master to be readable, then reads once and
 * prints the bytes read, as numbers. */
static void rd(const char *what, int cap)
{
	unsigned char b[64];
	struct pollfd p = { m, POLLIN, 0 };
	poll(&p, 1, 5000);
	ssize_t n = read(m, b, cap);
	if (n < 0) {
		printf("%s: errno=%s\n", what, errname(errno));
		return;
	}
	printf("%s: %zd [", what, n);
	for (ssize_t i = 0; i < n; i++)
		printf(i ? " %u" : "%u", b[i]);
	printf("]\n");
}

/* The master's poll bits that packet mode concerns, now. */
static void pollbits(const char *what)
{
	struct pollfd p = { m, POLLIN | POLLPRI, 0 };
	poll(&p, 1, 0);
	printf("%s: POLLIN=%d POLLPRI=%d POLLRDNORM=%d\n", what, !!(p.revents & POLLIN),
	       !!(p.revents & POLLPRI), !!(p.revents & POLLRDNORM));
}

/* Nothing for the master within 200 ms. */
static int quiet(void)
{
	struct pollfd p = { m, POLLIN | POLLPRI, 0 };
	return poll(&p, 1, 200) == 0;
}

static void set_iflag(int on, int off)
{
	struct termios t;
	tcgetattr(s, &t);
	t.c_iflag = (t.c_iflag | on) & ~off;
	tcsetattr(s, TCSANOW, &t);
}

int main(void)
{
	open_pty(&m, &s);
	int v = -1, one = 1, zero = 0;

	/* Only the master has a packet mode. */
	EXPECT(ioctl(m, TIOCGPKT, &v), 0);
	EXPECT(v, 0);
	EXPECT_ERR(ioctl(s, TIOCPKT, &one), ENOTTY);
	EXPECT_ERR(ioctl(s, TIOCGPKT, &v), ENOTTY);
	EXPECT_ERR(ioctl(m, TIOCPKT, BADPTR), EFAULT);
	EXPECT(ioctl(m, TIOCPKT, &one), 0);
	EXPECT(ioctl(m, TIOCGPKT, &v), 0);
	EXPECT(v, 1);
	EXPECT_TRUE(quiet());

	/* Data comes after TIOCPKT_DATA; a one-byte read gets only that. */
	EXPECT(write(s, "hi", 2), 2);
	rd("data", 64);
	EXPECT(write(s, "x", 1), 1);
	rd("one byte", 1);
	rd("the rest", 64);

	/* Flushing the slave's queues. */
	EXPECT(tcflush(s, TCIFLUSH), 0);
	pollbits("after TCIFLUSH");
	rd("TCIFLUSH", 64);
	pollbits("after the status read");
	EXPECT(tcflush(s, TCOFLUSH), 0);
	rd("TCOFLUSH", 64);
	EXPECT(tcflush(s, TCIOFLUSH), 0);
	rd("TCIOFLUSH", 64);
	/* The master's own queues are not the slave's. */
	EXPECT(tcflush(m, TCIOFLUSH), 0);
	EXPECT_TRUE(quiet());
	/* TCSAFLUSH flushes the slave's input, from either end. */
	struct termios t;
	tcgetattr(s, &t);
	EXPECT(tcsetattr(m, TCSAFLUSH, &t), 0);
	rd("TCSAFLUSH on the master", 64);
	EXPECT(tcsetattr(s, TCSADRAIN, &t), 0);
	EXPECT_TRUE(quiet());

	/* Output stopped and restarted: by tcflow on the slave, by ^S/^Q. */
	EXPECT(tcflow(s, TCOOFF), 0);
	rd("TCOOFF", 64);
	EXPECT(tcflow(s, TCOON), 0);
	rd("TCOON", 64);
	EXPECT(tcflow(s, TCOOFF), 0);
	EXPECT(tcflow(s, TCOON), 0);
	rd("TCOOFF then TCOON", 64);
	EXPECT(write(m, "\x13", 1), 1);
	rd("^S", 64);
	EXPECT(write(m, "\x11", 1), 1);
	rd("^Q", 64);

	/* ^S/^Q flow control on and off. */
	set_iflag(0, IXON);
	rd("IXON off", 64);
	set_iflag(IXON, 0);
	rd("IXON on", 64);
	tcgetattr(s, &t);
	t.c_cc[VSTOP] = 0x10;
	tcsetattr(s, TCSANOW, &t);
	rd("VSTOP changed", 64);
	t.c_cc[VSTOP] = 0x13;
	tcsetattr(s, TCSANOW, &t);
	rd("VSTOP back", 64);
	/* Stopped, then IXON off: output restarts (and flow control is off). */
	EXPECT(write(m, "\x13", 1), 1);
	rd("^S again", 64);
	set_iflag(0, IXON);
	rd("IXON off while stopped", 64);
	set_iflag(IXON, 0);
	rd("IXON on again", 64);

	/* Any termios change under EXTPROC. */
	tcgetattr(s, &t);
	t.c_lflag |= EXTPROC;
	tcsetattr(s, TCSANOW, &t);
	rd("EXTPROC on", 64);
	t.c_lflag &= ~EXTPROC;
	tcsetattr(s, TCSANOW, &t);
	rd("EXTPROC off", 64);

	/* An ISIG character flushes both queues; its echo follows as data. */
	EXPECT(write(m, "\x03", 1), 1);
	rd("^C", 64);
	rd("^C echo", 64);

	/* Packet mode off: plain data, and flushes are not reported ... */
	EXPECT(ioctl(m, TIOCPKT, &zero), 0);
	EXPECT(ioctl(m, TIOCGPKT, &v), 0);
	EXPECT(v, 0);
	EXPECT(write(s, "z", 1), 1);
	rd("plain", 64);
	EXPECT(tcflush(s, TCIOFLUSH), 0);
	EXPECT_TRUE(quiet());
	/* ... not even once it is back on. */
	EXPECT(ioctl(m, TIOCPKT, &one), 0);
	EXPECT_TRUE(quiet());
	EXPECT(write(s, "y", 1), 1);
	rd("data again", 64);

	/* A status byte set twice before a read comes once. */
	EXPECT(tcflush(s, TCIFLUSH), 0);
	EXPECT(tcflush(s, TCIFLUSH), 0);
	rd("two TCIFLUSH", 64);
	EXPECT_TRUE(quiet());

	/* With the slave closed, status first, then EIO. */
	EXPECT(tcflush(s, TCOFLUSH), 0);
	close(s);
	rd("last status", 64);
	rd("after close", 64);
	return t_done();
}
