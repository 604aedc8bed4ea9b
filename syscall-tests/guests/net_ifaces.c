/* Interfaces as programs enumerate them: getifaddrs (rtnetlink dumps),
 * if_nametoindex / if_indextoname and the netdevice(7) ioctls, for the
 * loopback interface (the host has others; the sandbox has only lo). */
#include "t.h"
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

static void show_addr(const char *what, struct sockaddr *sa)
{
	char buf[INET6_ADDRSTRLEN] = "-";
	if (sa && sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, buf, sizeof buf);
	else if (sa && sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)sa)->sin6_addr, buf, sizeof buf);
	SHOW("  %s %s", what, buf);
}

int main(void)
{
	struct ifaddrs *ifa;
	EXPECT(getifaddrs(&ifa), 0);
	for (struct ifaddrs *p = ifa; p; p = p->ifa_next) {
		if (strcmp(p->ifa_name, "lo") != 0)
			continue;
		int fam = p->ifa_addr ? p->ifa_addr->sa_family : -1;
		SHOW("lo family=%s flags=%#x", fam == AF_INET ? "inet" : fam == AF_INET6 ? "inet6" : fam == AF_PACKET ? "packet" : "?",
		     p->ifa_flags & (IFF_UP | IFF_LOOPBACK | IFF_RUNNING));
		if (fam == AF_INET || fam == AF_INET6) {
			show_addr("addr", p->ifa_addr);
			show_addr("mask", p->ifa_netmask);
		}
	}
	freeifaddrs(ifa);

	EXPECT(if_nametoindex("lo"), 1);
	EXPECT(if_nametoindex("no-such-if0"), 0);
	char name[IF_NAMESIZE];
	EXPECT_TRUE(if_indextoname(1, name) != NULL && strcmp(name, "lo") == 0);

	int s;
	EXPECT_OK(s = socket(AF_INET, SOCK_DGRAM, 0));
	struct ifreq r;
	memset(&r, 0, sizeof r);
	strcpy(r.ifr_name, "lo");
	EXPECT(ioctl(s, SIOCGIFFLAGS, &r), 0);
	SHOW("SIOCGIFFLAGS up=%d loopback=%d", !!(r.ifr_flags & IFF_UP), !!(r.ifr_flags & IFF_LOOPBACK));
	EXPECT(ioctl(s, SIOCGIFMTU, &r), 0);
	SHOW("mtu %d", r.ifr_mtu);
	EXPECT(ioctl(s, SIOCGIFADDR, &r), 0);
	show_addr("SIOCGIFADDR", &r.ifr_addr);
	EXPECT(ioctl(s, SIOCGIFINDEX, &r), 0);
	SHOW("index %d", r.ifr_ifindex);
	strcpy(r.ifr_name, "no-such-if0");
	EXPECT_ERR(ioctl(s, SIOCGIFINDEX, &r), ENODEV);
	EXPECT_ERR(ioctl(s, SIOCGIFFLAGS, BADPTR), EFAULT);
	close(s);

	/* A raw rtnetlink exchange: RTM_GETLINK for index 1. */
	int nl;
	EXPECT_OK(nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	EXPECT(bind(nl, (struct sockaddr *)&sa, sizeof sa), 0);
	socklen_t sl = sizeof sa;
	EXPECT(getsockname(nl, (struct sockaddr *)&sa, &sl), 0);
	EXPECT_TRUE(sl == sizeof sa && sa.nl_family == AF_NETLINK && sa.nl_pid != 0);
	struct {
		struct nlmsghdr h;
		struct ifinfomsg i;
	} req = { .h = { .nlmsg_len = sizeof req, .nlmsg_type = RTM_GETLINK, .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 42 },
		  .i = { .ifi_family = AF_UNSPEC, .ifi_index = 1 } };
	EXPECT(send(nl, &req, sizeof req, 0), (long)sizeof req);
	char buf[8192];
	long n;
	EXPECT_OK(n = recv(nl, buf, sizeof buf, 0));
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	EXPECT_TRUE(NLMSG_OK(h, n) && h->nlmsg_type == RTM_NEWLINK && h->nlmsg_seq == 42 && h->nlmsg_pid == sa.nl_pid);
	struct ifinfomsg *ii = NLMSG_DATA(h);
	SHOW("RTM_NEWLINK index=%d loopback=%d", ii->ifi_index, !!(ii->ifi_flags & IFF_LOOPBACK));
	/* Nothing more waits. */
	EXPECT_ERR(recv(nl, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
	/* An unknown index: an error message with ENODEV. */
	req.i.ifi_index = 999999;
	EXPECT(send(nl, &req, sizeof req, 0), (long)sizeof req);
	EXPECT_OK(n = recv(nl, buf, sizeof buf, 0));
	EXPECT_TRUE(h->nlmsg_type == NLMSG_ERROR);
	SHOW("error %d", ((struct nlmsgerr *)NLMSG_DATA(h))->error);
	close(nl);
	return t_done();
}
