//! Netlink and rtnetlink: message headers, flags and attribute types
//! (netlink(7), rtnetlink(7)), and the interface, route and address
//! values they carry (netdevice(7), linux/if.h, linux/rtnetlink.h).

/// `NETLINK_ROUTE`: routing and link information.
pub const NETLINK_ROUTE: i32 = 0;

/// `NLMSG_HDRLEN`: `sizeof(struct nlmsghdr)`, aligned.
pub const NLMSG_HDRLEN: usize = 16;
/// An error or an acknowledgement.
pub const NLMSG_ERROR: u16 = 2;
/// The end of a multipart message.
pub const NLMSG_DONE: u16 = 3;
/// A request.
pub const NLM_F_REQUEST: u16 = 0x1;
/// Part of a multipart message.
pub const NLM_F_MULTI: u16 = 0x2;
/// Asks for an acknowledgement.
pub const NLM_F_ACK: u16 = 0x4;
/// `NLM_F_ROOT | NLM_F_MATCH`: the whole table.
pub const NLM_F_DUMP: u16 = 0x300;

/// A link (its description, in reply to `RTM_GETLINK`).
pub const RTM_NEWLINK: u16 = 16;
/// Asks for links.
pub const RTM_GETLINK: u16 = 18;
/// An address.
pub const RTM_NEWADDR: u16 = 20;
/// Asks for addresses.
pub const RTM_GETADDR: u16 = 22;
/// A route.
pub const RTM_NEWROUTE: u16 = 24;
/// Asks for routes.
pub const RTM_GETROUTE: u16 = 26;

// Link attributes (`IFLA_*`).
/// hardware address
pub const IFLA_ADDRESS: u16 = 1;
/// hardware broadcast address
pub const IFLA_BROADCAST: u16 = 2;
/// name
pub const IFLA_IFNAME: u16 = 3;
/// MTU
pub const IFLA_MTU: u16 = 4;
/// the device it is tied to
pub const IFLA_LINK: u16 = 5;
/// queueing discipline
pub const IFLA_QDISC: u16 = 6;
/// `txqueuelen`
pub const IFLA_TXQLEN: u16 = 13;
/// RFC 2863 operational state
pub const IFLA_OPERSTATE: u16 = 16;
/// link mode
pub const IFLA_LINKMODE: u16 = 17;
/// group
pub const IFLA_GROUP: u16 = 27;

// Address attributes (`IFA_*`).
/// the address (the peer's, on a point-to-point link)
pub const IFA_ADDRESS: u16 = 1;
/// the local address
pub const IFA_LOCAL: u16 = 2;
/// the interface's name
pub const IFA_LABEL: u16 = 3;
/// the broadcast address
pub const IFA_BROADCAST: u16 = 4;
/// lifetimes (`struct ifa_cacheinfo`)
pub const IFA_CACHEINFO: u16 = 6;
/// 32-bit flags
pub const IFA_FLAGS: u16 = 8;
/// `IFA_F_PERMANENT`: an address set by hand, not learned.
pub const IFA_F_PERMANENT: u32 = 0x80;

// Route attributes (`RTA_*`).
/// destination
pub const RTA_DST: u16 = 1;
/// source
pub const RTA_SRC: u16 = 2;
/// output interface
pub const RTA_OIF: u16 = 4;
/// gateway
pub const RTA_GATEWAY: u16 = 5;
/// metric
pub const RTA_PRIORITY: u16 = 6;
/// preferred source address
pub const RTA_PREFSRC: u16 = 7;
/// cache information (`struct rta_cacheinfo`)
pub const RTA_CACHEINFO: u16 = 12;
/// table, 32 bits
pub const RTA_TABLE: u16 = 15;
/// router preference
pub const RTA_PREF: u16 = 20;
/// the uid a lookup was for
pub const RTA_UID: u16 = 25;

/// `rtm_flags` of a route lookup's answer: a cached route.
pub const RTM_F_CLONED: u32 = 0x200;
/// Delivered here.
pub const RTCF_LOCAL: u32 = 0x8000_0000;
/// To a broadcast address.
pub const RTCF_BROADCAST: u32 = 0x1000_0000;
/// To a multicast address.
pub const RTCF_MULTICAST: u32 = 0x2000_0000;

// Interface flags (`IFF_*`, netdevice(7)).
/// administratively up
pub const IFF_UP: u32 = 0x1;
/// has a broadcast address
pub const IFF_BROADCAST: u32 = 0x2;
/// the loopback interface
pub const IFF_LOOPBACK: u32 = 0x8;
/// resources allocated
pub const IFF_RUNNING: u32 = 0x40;
/// supports multicast
pub const IFF_MULTICAST: u32 = 0x1000;
/// the driver says the link is up
pub const IFF_LOWER_UP: u32 = 0x1_0000;

/// `ARPHRD_ETHER`: an Ethernet device.
pub const ARPHRD_ETHER: u16 = 1;
/// `ARPHRD_LOOPBACK`: the loopback device.
pub const ARPHRD_LOOPBACK: u16 = 772;
/// `IF_OPER_UNKNOWN`: what Linux reports for `lo`.
pub const IF_OPER_UNKNOWN: u8 = 0;
/// `IF_OPER_UP`.
pub const IF_OPER_UP: u8 = 6;

/// The main routing table.
pub const RT_TABLE_MAIN: u8 = 254;
/// The local table (local and broadcast addresses).
pub const RT_TABLE_LOCAL: u8 = 255;
/// A gateway or direct route.
pub const RTN_UNICAST: u8 = 1;
/// A local address.
pub const RTN_LOCAL: u8 = 2;
/// A broadcast address, sent as broadcast.
pub const RTN_BROADCAST: u8 = 3;
/// A multicast route.
pub const RTN_MULTICAST: u8 = 5;
/// Global scope.
pub const RT_SCOPE_UNIVERSE: u8 = 0;
/// On the link.
pub const RT_SCOPE_LINK: u8 = 253;
/// On this host.
pub const RT_SCOPE_HOST: u8 = 254;
/// A route the kernel made.
pub const RTPROT_KERNEL: u8 = 2;
/// A route set at boot.
pub const RTPROT_BOOT: u8 = 3;
