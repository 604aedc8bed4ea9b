//! Socket option levels, options and control messages of Linux's inet
//! sockets (socket(7), ip(7), ipv6(7)).

/// Address families (`sa_family_t`).
pub const AF_INET: u16 = 2;
/// IPv6.
pub const AF_INET6: u16 = 10;

/// The socket level of `setsockopt` and of control messages.
pub const SOL_SOCKET: i32 = 1;
/// The IPv4 level.
pub const IPPROTO_IP: i32 = 0;
/// The IPv6 level.
pub const IPPROTO_IPV6: i32 = 41;

/// `SO_TIMESTAMP_OLD`, also the `SCM_TIMESTAMP` message type.
pub const SO_TIMESTAMP: i32 = 29;
/// `SO_TIMESTAMPNS_OLD` / `SCM_TIMESTAMPNS`.
pub const SO_TIMESTAMPNS: i32 = 35;
/// `SO_TIMESTAMP_NEW` / `SCM_TIMESTAMP_NEW` (same layout as the old one on
/// x86-64: two 64-bit words).
pub const SO_TIMESTAMP_NEW: i32 = 63;
/// `SO_TIMESTAMPNS_NEW` / `SCM_TIMESTAMPNS_NEW`.
pub const SO_TIMESTAMPNS_NEW: i32 = 64;
/// `SO_TIMESTAMPING_OLD`, also the `SCM_TIMESTAMPING` message type.
pub const SO_TIMESTAMPING: i32 = 37;
/// `SO_TIMESTAMPING_NEW` / `SCM_TIMESTAMPING_NEW` (the same three
/// timespecs on x86-64).
pub const SO_TIMESTAMPING_NEW: i32 = 65;

// `SOF_TIMESTAMPING_*` flags (linux/net_tstamp.h).
/// a software stamp of each arrival
pub const SOF_TIMESTAMPING_RX_SOFTWARE: u32 = 1 << 3;
/// report software stamps
pub const SOF_TIMESTAMPING_SOFTWARE: u32 = 1 << 4;
/// stamps carry an id
pub const SOF_TIMESTAMPING_OPT_ID: u32 = 1 << 7;
/// transmit stamps without the packet
pub const SOF_TIMESTAMPING_OPT_TSONLY: u32 = 1 << 11;
/// statistics with transmit stamps
pub const SOF_TIMESTAMPING_OPT_STATS: u32 = 1 << 12;
/// bind to a PHC (`SO_TIMESTAMPING` with `struct so_timestamping`)
pub const SOF_TIMESTAMPING_BIND_PHC: u32 = 1 << 15;
/// TCP ids count bytes sent, not queued
pub const SOF_TIMESTAMPING_OPT_ID_TCP: u32 = 1 << 16;
/// receive stamps only of the kinds asked for
pub const SOF_TIMESTAMPING_OPT_RX_FILTER: u32 = 1 << 17;
/// Every flag Linux 6.18 knows (up to `SOF_TIMESTAMPING_TX_COMPLETION`).
pub const SOF_TIMESTAMPING_MASK: u32 = (1 << 19) - 1;

/// `IP_TOS`.
pub const IP_TOS: i32 = 1;
/// `IP_TTL`.
pub const IP_TTL: i32 = 2;
/// `IP_PKTINFO`, also its control message's type.
pub const IP_PKTINFO: i32 = 8;
/// `IP_PKTOPTIONS` (`getsockopt` only, TCP only).
pub const IP_PKTOPTIONS: i32 = 9;
/// `IP_RECVERR`, also the type of its control message.
pub const IP_RECVERR: i32 = 11;
/// `IP_RECVTTL`.
pub const IP_RECVTTL: i32 = 12;
/// `IP_RECVTOS`.
pub const IP_RECVTOS: i32 = 13;
/// `IPV6_RECVERR`, also the type of its control message.
pub const IPV6_RECVERR: i32 = 25;
/// `IPV6_RECVPKTINFO`.
pub const IPV6_RECVPKTINFO: i32 = 49;
/// `IPV6_PKTINFO`, also its control message's type.
pub const IPV6_PKTINFO: i32 = 50;
/// `IPV6_RECVHOPLIMIT`.
pub const IPV6_RECVHOPLIMIT: i32 = 51;
/// `IPV6_HOPLIMIT`, also its control message's type.
pub const IPV6_HOPLIMIT: i32 = 52;
/// `IPV6_RECVTCLASS`.
pub const IPV6_RECVTCLASS: i32 = 66;
/// `IPV6_TCLASS`, also its control message's type.
pub const IPV6_TCLASS: i32 = 67;

/// `ee_origin` of an error queued by an ICMP message.
pub const SO_EE_ORIGIN_ICMP: u8 = 2;
/// `ee_origin` of an error queued by an ICMPv6 message.
pub const SO_EE_ORIGIN_ICMP6: u8 = 3;

/// `MSG_CTRUNC`: the control buffer was too small.
pub const MSG_CTRUNC: u32 = 8;
