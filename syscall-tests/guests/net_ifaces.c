/* Interfaces as programs enumerate them: getifaddrs (rtnetlink dumps),
 * if_nametoindex / if_indextoname and the netdevice(7) ioctls, for the
 * loopback interface (the host has others; the sandbox has only lo), and
 * lo's routes and /proc/net lines. */
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
	EXPECT(ioctl(s, SIOCGIFTXQLEN, &r), 0);
	SHOW("qlen %d", r.ifr_qlen);
	EXPECT(ioctl(s, SIOCGIFHWADDR, &r), 0);
	SHOW("hwaddr family %d", r.ifr_hwaddr.sa_family);
	EXPECT(ioctl(s, SIOCGIFNETMASK, &r), 0);
	show_addr("SIOCGIFNETMASK", &r.ifr_netmask);
	/* SIOCGIFCONF: lo is among the IPv4 interfaces, with its address. */
	struct ifreq all[32];
	struct ifconf ifc = { .ifc_len = sizeof all, .ifc_req = all };
	EXPECT(ioctl(s, SIOCGIFCONF, &ifc), 0);
	EXPECT_TRUE(ifc.ifc_len > 0 && ifc.ifc_len % (int)sizeof(struct ifreq) == 0);
	for (int k = 0; k < ifc.ifc_len / (int)sizeof(struct ifreq); k++)
		if (strcmp(all[k].ifr_name, "lo") == 0)
			show_addr("SIOCGIFCONF lo", &all[k].ifr_addr);
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

	/* A route dump: lo's routes (IPv4 and IPv6, every table), as
	 * `ip route show table all dev lo` would list them. */
	struct {
		struct nlmsghdr h;
		struct rtmsg r;
	} rq = { .h = { .nlmsg_len = sizeof rq, .nlmsg_type = RTM_GETROUTE, .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 43 },
		 .r = { .rtm_family = AF_UNSPEC } };
	EXPECT(send(nl, &rq, sizeof rq, 0), (long)sizeof rq);
	int done = 0;
	while (!done && (n = recv(nl, buf, sizeof buf, 0)) > 0) {
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE) {
				done = 1;
				break;
			}
			if (h->nlmsg_type != RTM_NEWROUTE)
				continue;
			struct rtmsg *rm = NLMSG_DATA(h);
			int oif = 0, prio = -1;
			char dst[INET6_ADDRSTRLEN] = "default";
			int len = RTM_PAYLOAD(h);
			for (struct rtattr *a = RTM_RTA(rm); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
				if (a->rta_type == RTA_OIF)
					oif = *(int *)RTA_DATA(a);
				else if (a->rta_type == RTA_PRIORITY)
					prio = *(int *)RTA_DATA(a);
				else if (a->rta_type == RTA_DST)
					inet_ntop(rm->rtm_family, RTA_DATA(a), dst, sizeof dst);
			}
			if (oif == 1)
				SHOW("route family=%d table=%d type=%d scope=%d proto=%d %s/%d metric=%d", rm->rtm_family,
				     rm->rtm_table, rm->rtm_type, rm->rtm_scope, rm->rtm_protocol, dst, rm->rtm_dst_len, prio);
		}
	}
	EXPECT_TRUE(done);
	close(nl);

	/* /proc/net: lo's lines. */
	char line[512];
	FILE *f = fopen("/proc/net/dev", "r");
	EXPECT_TRUE(f != NULL);
	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, "Inter-", 6) == 0 || strncmp(line, " face", 5) == 0 || strstr(line, " lo:") == line + 3)
			SHOW("dev: %.*s", (int)strcspn(line, ":|\n"), line);
	if (f)
		fclose(f);
	f = fopen("/proc/net/if_inet6", "r");
	EXPECT_TRUE(f != NULL);
	while (f && fgets(line, sizeof line, f))
		if (strstr(line, " lo\n"))
			SHOW("if_inet6: %.*s", (int)strcspn(line, "\n"), line);
	if (f)
		fclose(f);
	return t_done();
}
