//! Control messages a guest asks for on its UDP and TCP sockets
//! (`SO_TIMESTAMP[NS]`, `SO_TIMESTAMPING`'s software receive stamp,
//! `IP_PKTINFO`, `IP_RECVTTL`, `IP_RECVTOS`, `IPV6_RECVPKTINFO`,
//! `IPV6_RECVHOPLIMIT`, `IPV6_RECVTCLASS`), the `IP_RECVERR` message of
//! `MSG_ERRQUEUE` and those of a TCP socket's `IP_PKTOPTIONS`: which
//! ones a socket wants, how
//! they are laid out in the guest's control buffer (Linux's `put_cmsg`,
//! `MSG_CTRUNC` included), and the checks that the host's control messages
//! (`--network host`) pass before any byte of them reaches the guest.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};

pub use abi::socket::{
    IPPROTO_IP, IPPROTO_IPV6, IPV6_HOPLIMIT, IPV6_PKTINFO, IPV6_RECVERR, IPV6_RECVHOPLIMIT,
    IPV6_RECVPKTINFO, IPV6_RECVTCLASS, IPV6_TCLASS, IP_PKTINFO, IP_PKTOPTIONS, IP_RECVERR,
    IP_RECVTOS, IP_RECVTTL, IP_TOS, IP_TTL, MSG_CTRUNC,
    SOF_TIMESTAMPING_RX_SOFTWARE as SOF_RX_SOFTWARE, SOF_TIMESTAMPING_SOFTWARE as SOF_SOFTWARE,
    SOL_SOCKET, SO_TIMESTAMP, SO_TIMESTAMPING, SO_TIMESTAMPING_NEW, SO_TIMESTAMPNS,
    SO_TIMESTAMPNS_NEW, SO_TIMESTAMP_NEW,
};
use abi::socket::{
    SOF_TIMESTAMPING_BIND_PHC as SOF_BIND_PHC, SOF_TIMESTAMPING_MASK as SOF_MASK,
    SOF_TIMESTAMPING_OPT_ID as SOF_OPT_ID, SOF_TIMESTAMPING_OPT_ID_TCP as SOF_OPT_ID_TCP,
    SOF_TIMESTAMPING_OPT_RX_FILTER as SOF_OPT_RX_FILTER,
    SOF_TIMESTAMPING_OPT_STATS as SOF_OPT_STATS, SOF_TIMESTAMPING_OPT_TSONLY as SOF_OPT_TSONLY,
    SO_EE_ORIGIN_ICMP, SO_EE_ORIGIN_ICMP6,
};

/// `sizeof(struct cmsghdr)`.
const CMSG_HDR: usize = 16;

// Which messages a socket asks for (Linux's SOCK_RCVTSTAMP,
// SOCK_RCVTSTAMPNS, SOCK_TSTAMP_NEW and the inet cmsg flags).
const RCVTSTAMP: u32 = 1;
const RCVTSTAMPNS: u32 = 2;
const TSTAMP_NEW: u32 = 4;
const PKTINFO: u32 = 8;
const TTL: u32 = 16;
const TOS: u32 = 32;
const V6_PKTINFO: u32 = 64;
const V6_HOPLIMIT: u32 = 128;
const V6_TCLASS: u32 = 256;

/// The control messages a socket asked for, set and read with
/// `setsockopt`/`getsockopt`: the flags above, and the socket's
/// `SO_TIMESTAMPING` flags (`sk_tsflags`).
///
/// Of `SO_TIMESTAMPING` only the software receive stamp is produced
/// (`SCM_TIMESTAMPING` with the arrival time first, the hardware slots
/// zero). The transmit flags are accepted and read back as Linux does,
/// but no transmit stamp is ever queued on the error queue: nothing in
/// the sandbox stamps packets as they leave.
#[derive(Debug, Default)]
pub struct RecvCmsgs(AtomicU32, AtomicU32);

impl Clone for RecvCmsgs {
    /// What an accepted socket inherits from its listener (`sk_clone_lock`
    /// copies the socket flags, `sk_tsflags` and the inet cmsg flags).
    fn clone(&self) -> Self {
        RecvCmsgs(
            AtomicU32::new(self.0.load(Ordering::Relaxed)),
            AtomicU32::new(self.1.load(Ordering::Relaxed)),
        )
    }
}

impl RecvCmsgs {
    fn flag(level: i32, name: i32) -> Option<u32> {
        Some(match (level, name) {
            (IPPROTO_IP, IP_PKTINFO) => PKTINFO,
            (IPPROTO_IP, IP_RECVTTL) => TTL,
            (IPPROTO_IP, IP_RECVTOS) => TOS,
            (IPPROTO_IPV6, IPV6_RECVPKTINFO) => V6_PKTINFO,
            (IPPROTO_IPV6, IPV6_RECVHOPLIMIT) => V6_HOPLIMIT,
            (IPPROTO_IPV6, IPV6_RECVTCLASS) => V6_TCLASS,
            _ => return None,
        })
    }

    /// Whether `(level, name)` is one of the options kept here.
    pub fn is_option(level: i32, name: i32) -> bool {
        Self::flag(level, name).is_some()
            || (level == SOL_SOCKET
                && matches!(
                    name,
                    SO_TIMESTAMP | SO_TIMESTAMPNS | SO_TIMESTAMP_NEW | SO_TIMESTAMPNS_NEW
                ))
    }

    /// `setsockopt`: `false` when the option is not one of these. The
    /// timestamp options replace one another as in Linux's
    /// `sock_set_timestamp`: the last one set decides the format.
    pub fn set(&self, level: i32, name: i32, on: bool) -> bool {
        let bits = self.0.load(Ordering::Relaxed);
        let new = if let Some(f) = Self::flag(level, name) {
            if on {
                bits | f
            } else {
                bits & !f
            }
        } else if Self::is_option(level, name) {
            // Setting either way also picks the messages' form
            // (`__sock_set_timestamps`), shared with SO_TIMESTAMPING.
            let mut b = bits & !(RCVTSTAMP | RCVTSTAMPNS | TSTAMP_NEW);
            if matches!(name, SO_TIMESTAMP_NEW | SO_TIMESTAMPNS_NEW) {
                b |= TSTAMP_NEW;
            }
            if on {
                b |= RCVTSTAMP;
                if matches!(name, SO_TIMESTAMPNS | SO_TIMESTAMPNS_NEW) {
                    b |= RCVTSTAMPNS;
                }
            }
            b
        } else {
            return false;
        };
        self.0.store(new, Ordering::Relaxed);
        true
    }

    /// `getsockopt`: the option's value (Linux's `sk_getsockopt`: each
    /// timestamp option reads 1 only in the format it set), `None` when
    /// it is not one of these.
    pub fn get(&self, level: i32, name: i32) -> Option<bool> {
        let b = self.0.load(Ordering::Relaxed);
        let has = |f| b & f != 0;
        if let Some(f) = Self::flag(level, name) {
            return Some(has(f));
        }
        if level != SOL_SOCKET {
            return None;
        }
        Some(match name {
            SO_TIMESTAMP => has(RCVTSTAMP) && !has(TSTAMP_NEW) && !has(RCVTSTAMPNS),
            SO_TIMESTAMPNS => has(RCVTSTAMPNS) && !has(TSTAMP_NEW),
            SO_TIMESTAMP_NEW => has(RCVTSTAMP) && has(TSTAMP_NEW) && !has(RCVTSTAMPNS),
            SO_TIMESTAMPNS_NEW => has(RCVTSTAMPNS) && has(TSTAMP_NEW),
            _ => return None,
        })
    }

    /// `setsockopt(SO_TIMESTAMPING[_NEW])` with `flags` (and, when the
    /// guest passed a `struct so_timestamping`, its `bind_phc`), checked
    /// as Linux's `sock_set_timestamping`. `tcp_unconnected`: a TCP socket
    /// closed or listening, which has no sequence number to key
    /// `SOF_TIMESTAMPING_OPT_ID` on.
    pub fn set_timestamping(
        &self,
        name: i32,
        flags: u32,
        tcp_unconnected: bool,
    ) -> Result<(), abi::Errno> {
        use abi::Errno;
        if flags & !SOF_MASK != 0
            || (flags & SOF_OPT_ID_TCP != 0 && flags & SOF_OPT_ID == 0)
            || (flags & SOF_OPT_STATS != 0 && flags & SOF_OPT_TSONLY == 0)
        {
            return Err(Errno::EINVAL);
        }
        let old = self.1.load(Ordering::Relaxed);
        if flags & SOF_OPT_ID != 0 && old & SOF_OPT_ID == 0 && tcp_unconnected {
            return Err(Errno::EINVAL);
        }
        // Binding to a PTP clock needs a socket bound to a device
        // (`sock_timestamping_bind_phc`); no socket here is.
        if flags & SOF_BIND_PHC != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        self.1.store(flags, Ordering::Relaxed);
        // Like the timestamp options, the last one set decides whether
        // messages come in the `_NEW` form (`SOCK_TSTAMP_NEW`).
        let bits = self.0.load(Ordering::Relaxed);
        let new = if name == SO_TIMESTAMPING_NEW {
            bits | TSTAMP_NEW
        } else {
            bits & !TSTAMP_NEW
        };
        self.0.store(new, Ordering::Relaxed);
        Ok(())
    }

    /// `getsockopt(SO_TIMESTAMPING[_NEW])`: the flags, except that the
    /// `_NEW` option reads them only if they were set through it
    /// (`sk_getsockopt`).
    pub fn timestamping(&self, name: i32) -> u32 {
        let new = self.0.load(Ordering::Relaxed) & TSTAMP_NEW != 0;
        if name == SO_TIMESTAMPING || new {
            self.1.load(Ordering::Relaxed)
        } else {
            0
        }
    }

    /// Whether an `SCM_TIMESTAMPING` software stamp goes with what is
    /// received (`__sock_recv_timestamp`, `tcp_recv_timestamp`): the
    /// socket asked to be told software stamps and receive stamps are
    /// taken, by its own `SOF_TIMESTAMPING_RX_SOFTWARE` or, unless it
    /// filters with `SOF_TIMESTAMPING_OPT_RX_FILTER`, by its
    /// `SO_TIMESTAMP[NS]`. (Linux stamps every packet once any socket of
    /// the host asks; here only a socket's own request counts.)
    fn rx_timestamping(&self) -> bool {
        let f = self.1.load(Ordering::Relaxed);
        let rcv = self.0.load(Ordering::Relaxed) & RCVTSTAMP != 0;
        f & SOF_SOFTWARE != 0 && (f & SOF_RX_SOFTWARE != 0 || (f & SOF_OPT_RX_FILTER == 0 && rcv))
    }

    /// Whether any message is asked for.
    pub fn any(&self) -> bool {
        self.0.load(Ordering::Relaxed) & !TSTAMP_NEW != 0 || self.rx_timestamping()
    }

    /// Whether a timestamp is asked for.
    pub fn timestamp(&self) -> bool {
        self.0.load(Ordering::Relaxed) & RCVTSTAMP != 0 || self.rx_timestamping()
    }
}

/// What the messages report about one received datagram (or, for TCP,
/// the bytes just read).
#[derive(Clone, Copy, Debug, Default)]
pub struct Arrival {
    /// `CLOCK_REALTIME` when it arrived: seconds, nanoseconds
    pub time: Option<(i64, i64)>,
    /// the address it was sent to, with the interface it came in on
    pub dst: Option<(IpAddr, i32)>,
    /// its TTL or hop limit
    pub hop_limit: Option<u8>,
    /// its TOS byte (IPv4) or traffic class (IPv6)
    pub tos: Option<u8>,
}

/// One control message: level, type and data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cmsg {
    pub level: i32,
    pub ty: i32,
    pub data: Vec<u8>,
}

fn cmsg(level: i32, ty: i32, data: &[u8]) -> Cmsg {
    Cmsg {
        level,
        ty,
        data: data.to_vec(),
    }
}

/// The messages `want` asks for about `a`, in the order Linux puts them
/// (`sock_recv_cmsgs` first, then `ip_cmsg_recv_offset` or
/// `ip6_datagram_recv_specific_ctl`). `datagram`: UDP; a TCP socket gets
/// only the timestamp (`tcp_recvmsg`). `v6`: the socket is `AF_INET6`.
pub fn messages(want: &RecvCmsgs, a: &Arrival, datagram: bool, v6: bool) -> Vec<Cmsg> {
    let b = want.0.load(Ordering::Relaxed);
    let mut out = Vec::new();
    if b & RCVTSTAMP != 0 {
        if let Some((sec, nsec)) = a.time {
            let ns = b & RCVTSTAMPNS != 0;
            let new = b & TSTAMP_NEW != 0;
            let (ty, sub) = match (ns, new) {
                (false, false) => (SO_TIMESTAMP, nsec / 1000),
                (true, false) => (SO_TIMESTAMPNS, nsec),
                (false, true) => (SO_TIMESTAMP_NEW, nsec / 1000),
                (true, true) => (SO_TIMESTAMPNS_NEW, nsec),
            };
            let mut d = sec.to_ne_bytes().to_vec();
            d.extend_from_slice(&sub.to_ne_bytes());
            out.push(cmsg(SOL_SOCKET, ty, &d));
        }
    }
    if want.rx_timestamping() {
        if let Some((sec, nsec)) = a.time {
            // struct scm_timestamping: the software stamp, then the
            // deprecated and the hardware slots, both zero.
            let ty = if b & TSTAMP_NEW != 0 {
                SO_TIMESTAMPING_NEW
            } else {
                SO_TIMESTAMPING
            };
            let mut d = sec.to_ne_bytes().to_vec();
            d.extend_from_slice(&nsec.to_ne_bytes());
            d.resize(48, 0);
            out.push(cmsg(SOL_SOCKET, ty, &d));
        }
    }
    if !datagram {
        return out;
    }
    let hop = a.hop_limit.map(i32::from);
    // A datagram that came over IPv4 (to an AF_INET6 socket: to a
    // v4-mapped address) gets the IPv4 messages; an AF_INET6 socket gets
    // IPV6_PKTINFO for either, IPV6_HOPLIMIT for IPv6 ones only
    // (`udpv6_recvmsg`).
    let dst4 = match a.dst {
        Some((IpAddr::V4(d), i)) => Some((d, i)),
        Some((IpAddr::V6(d), i)) => d.to_ipv4_mapped().map(|d| (d, i)),
        None => None,
    };
    if v6 && b & V6_PKTINFO != 0 {
        if let Some((dst, ifindex)) = a.dst {
            let addr = match dst {
                IpAddr::V6(a) => a,
                IpAddr::V4(a) => a.to_ipv6_mapped(),
            };
            let mut d = addr.octets().to_vec();
            d.extend_from_slice(&ifindex.to_ne_bytes());
            out.push(cmsg(IPPROTO_IPV6, IPV6_PKTINFO, &d));
        }
    }
    if v6 && dst4.is_none() {
        if let (true, Some(h)) = (b & V6_HOPLIMIT != 0, hop) {
            out.push(cmsg(IPPROTO_IPV6, IPV6_HOPLIMIT, &h.to_ne_bytes()));
        }
        if let (true, Some(t)) = (b & V6_TCLASS != 0, a.tos) {
            // An int, unlike IPv4's byte.
            out.push(cmsg(IPPROTO_IPV6, IPV6_TCLASS, &i32::from(t).to_ne_bytes()));
        }
        return out;
    }
    if let (true, Some((dst, ifindex))) = (b & PKTINFO != 0, dst4) {
        // struct in_pktinfo: ifindex, the local address a reply would
        // come from (ipi_spec_dst), the header's destination.
        let mut d = ifindex.to_ne_bytes().to_vec();
        d.extend_from_slice(&dst.octets());
        d.extend_from_slice(&dst.octets());
        out.push(cmsg(IPPROTO_IP, IP_PKTINFO, &d));
    }
    if let (true, Some(h)) = (b & TTL != 0, hop) {
        out.push(cmsg(IPPROTO_IP, IP_TTL, &h.to_ne_bytes()));
    }
    if let (true, Some(t)) = (b & TOS != 0, a.tos) {
        // One byte, as Linux puts it.
        out.push(cmsg(IPPROTO_IP, IP_TOS, &[t]));
    }
    out
}

/// The messages of `getsockopt(IP_PKTOPTIONS)` on a TCP socket, as
/// `do_ip_getsockopt` builds them: for each of `IP_PKTINFO`,
/// `IP_RECVTTL`, `IP_RECVTOS` the socket asked for, `in_pktinfo` with its
/// local address, the TTL and the TOS (here an int) of `p`.
pub fn pkt_options(want: &RecvCmsgs, p: &netstack::PktOptions) -> Vec<Cmsg> {
    let b = want.0.load(Ordering::Relaxed);
    let mut out = Vec::new();
    if b & PKTINFO != 0 {
        let mut d = p.ifindex.to_ne_bytes().to_vec();
        d.extend_from_slice(&p.local.octets());
        d.extend_from_slice(&p.local.octets());
        out.push(cmsg(IPPROTO_IP, IP_PKTINFO, &d));
    }
    if b & TTL != 0 {
        out.push(cmsg(IPPROTO_IP, IP_TTL, &i32::from(p.ttl).to_ne_bytes()));
    }
    if b & TOS != 0 {
        out.push(cmsg(IPPROTO_IP, IP_TOS, &i32::from(p.tos).to_ne_bytes()));
    }
    out
}

/// The `IP_RECVERR` (`IPV6_RECVERR` on an `AF_INET6` socket) message of
/// `recvmsg(MSG_ERRQUEUE)`: `struct sock_extended_err` followed by the
/// offender's address (`ip_recv_error`, `ipv6_recv_error`).
pub fn extended_err(e: &netstack::QueuedError, v6: bool) -> Cmsg {
    let mut d = (e.errno.0 as u32).to_ne_bytes().to_vec();
    let origin = if e.offender.is_ipv6() && v6 {
        SO_EE_ORIGIN_ICMP6
    } else {
        SO_EE_ORIGIN_ICMP
    };
    // ee_origin, ee_type, ee_code, ee_pad; ee_info and ee_data are 0 for
    // a port unreachable.
    d.extend_from_slice(&[origin, e.icmp_type, e.icmp_code, 0]);
    d.extend_from_slice(&[0u8; 8]);
    let off = std::net::SocketAddr::new(e.offender, 0);
    if v6 {
        let domain = netstack::Domain::Inet6;
        d.extend_from_slice(&super::inet::encode_addr(off, domain));
        cmsg(IPPROTO_IPV6, IPV6_RECVERR, &d)
    } else {
        d.extend_from_slice(&super::inet::encode_addr(off, netstack::Domain::Inet));
        cmsg(IPPROTO_IP, IP_RECVERR, &d)
    }
}

fn align8(n: usize) -> usize {
    (n + 7) & !7
}

/// Lays `msgs` out in a control buffer of `room` bytes as Linux's
/// `put_cmsg` does: a message that does not fit is cut to what is left
/// (its `cmsg_len` saying so) and `MSG_CTRUNC` set; with less than a
/// header left, nothing more is written. Returns the bytes and the flags.
pub fn encode(msgs: &[Cmsg], room: usize) -> (Vec<u8>, u32) {
    let mut out = Vec::new();
    let mut flags = 0;
    for m in msgs {
        let left = room - out.len();
        if left < CMSG_HDR {
            flags |= MSG_CTRUNC;
            break;
        }
        let mut len = CMSG_HDR + m.data.len();
        if left < len {
            flags |= MSG_CTRUNC;
            len = left;
        }
        let start = out.len();
        out.extend_from_slice(&(len as u64).to_ne_bytes());
        out.extend_from_slice(&m.level.to_ne_bytes());
        out.extend_from_slice(&m.ty.to_ne_bytes());
        out.extend_from_slice(&m.data[..len - CMSG_HDR]);
        out.resize(start + align8(len).min(left), 0);
    }
    (out, flags)
}

/// The control messages of the host's `recvmsg`, checked one by one: only
/// the kinds above, each with exactly its own size and sane values, are
/// kept (re-encoded by [`encode`], never copied as they came); anything
/// else, a malformed header included, ends the walk and is dropped.
pub fn parse_host(raw: &[u8]) -> Vec<Cmsg> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while raw.len().saturating_sub(at) >= CMSG_HDR {
        let word = |o: usize| -> Option<[u8; 4]> { raw.get(at + o..at + o + 4)?.try_into().ok() };
        let Some(len) = raw
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_ne_bytes)
        else {
            break;
        };
        let (Some(level), Some(ty)) = (word(8), word(12)) else {
            break;
        };
        let (level, ty) = (i32::from_ne_bytes(level), i32::from_ne_bytes(ty));
        let len = len as usize;
        if len < CMSG_HDR || len > raw.len() - at {
            break;
        }
        let data = &raw[at + CMSG_HDR..at + len];
        if let Some(m) = checked(level, ty, data) {
            out.push(m);
        }
        at += align8(len);
    }
    out
}

/// One host control message, if it is of a kind the guest may ask for and
/// well formed.
fn checked(level: i32, ty: i32, d: &[u8]) -> Option<Cmsg> {
    let int = || -> Option<i32> { Some(i32::from_ne_bytes(d.try_into().ok()?)) };
    let ok = match (level, ty) {
        (SOL_SOCKET, SO_TIMESTAMP | SO_TIMESTAMP_NEW) => {
            let (s, u) = pair(d)?;
            s >= 0 && (0..1_000_000).contains(&u)
        }
        (SOL_SOCKET, SO_TIMESTAMPNS | SO_TIMESTAMPNS_NEW) => {
            let (s, n) = pair(d)?;
            s >= 0 && (0..1_000_000_000).contains(&n)
        }
        (IPPROTO_IP, IP_PKTINFO) => d.len() == 12,
        (IPPROTO_IP, IP_TTL) => int().is_some_and(|v| (0..=255).contains(&v)),
        (IPPROTO_IP, IP_TOS) => d.len() == 1,
        (IPPROTO_IPV6, IPV6_PKTINFO) => d.len() == 20,
        (IPPROTO_IPV6, IPV6_HOPLIMIT | IPV6_TCLASS) => {
            int().is_some_and(|v| (0..=255).contains(&v))
        }
        _ => false,
    };
    ok.then(|| cmsg(level, ty, d))
}

fn pair(d: &[u8]) -> Option<(i64, i64)> {
    if d.len() != 16 {
        return None;
    }
    Some((
        i64::from_ne_bytes(d[..8].try_into().ok()?),
        i64::from_ne_bytes(d[8..].try_into().ok()?),
    ))
}

/// The loopback interface's index, the only interface of the netstack.
pub const LOOPBACK_IFINDEX: i32 = 1;

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn all_v4() -> RecvCmsgs {
        let w = RecvCmsgs::default();
        for (l, n) in [
            (SOL_SOCKET, SO_TIMESTAMP),
            (IPPROTO_IP, IP_PKTINFO),
            (IPPROTO_IP, IP_RECVTTL),
            (IPPROTO_IP, IP_RECVTOS),
        ] {
            assert!(w.set(l, n, true));
        }
        w
    }

    fn arrival() -> Arrival {
        Arrival {
            time: Some((1_700_000_000, 123_456_789)),
            dst: Some((IpAddr::V4(Ipv4Addr::LOCALHOST), 1)),
            hop_limit: Some(64),
            tos: Some(0),
        }
    }

    #[test]
    fn timestamp_options_replace_one_another() {
        let w = RecvCmsgs::default();
        assert!(w.set(SOL_SOCKET, SO_TIMESTAMPNS, true));
        assert_eq!(w.get(SOL_SOCKET, SO_TIMESTAMPNS), Some(true));
        assert_eq!(w.get(SOL_SOCKET, SO_TIMESTAMP), Some(false));
        assert!(w.set(SOL_SOCKET, SO_TIMESTAMP, true));
        assert_eq!(w.get(SOL_SOCKET, SO_TIMESTAMPNS), Some(false));
        assert_eq!(w.get(SOL_SOCKET, SO_TIMESTAMP), Some(true));
        assert!(w.set(SOL_SOCKET, SO_TIMESTAMPNS, false));
        assert!(!w.any());
        assert!(!w.set(SOL_SOCKET, 2, true));
    }

    #[test]
    fn so_timestamping_flags_are_checked_and_read_back_like_linux() {
        use abi::Errno;
        let w = RecvCmsgs::default();
        let rx = SOF_RX_SOFTWARE | SOF_SOFTWARE;
        assert_eq!(
            w.set_timestamping(SO_TIMESTAMPING, 1 << 30, false),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            w.set_timestamping(SO_TIMESTAMPING, SOF_OPT_ID_TCP, false),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            w.set_timestamping(SO_TIMESTAMPING, SOF_OPT_STATS, false),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            w.set_timestamping(SO_TIMESTAMPING, SOF_BIND_PHC, false),
            Err(Errno::EOPNOTSUPP)
        );
        assert_eq!(
            w.set_timestamping(SO_TIMESTAMPING, SOF_OPT_ID, true),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            w.set_timestamping(SO_TIMESTAMPING, SOF_OPT_ID, false),
            Ok(())
        );
        // Once on, OPT_ID no longer needs a connection.
        assert_eq!(
            w.set_timestamping(SO_TIMESTAMPING, SOF_OPT_ID, true),
            Ok(())
        );
        assert_eq!(w.set_timestamping(SO_TIMESTAMPING, rx, false), Ok(()));
        assert_eq!(w.timestamping(SO_TIMESTAMPING), rx);
        assert_eq!(w.timestamping(SO_TIMESTAMPING_NEW), 0);
        assert!(w.any() && w.timestamp());
        assert_eq!(w.set_timestamping(SO_TIMESTAMPING_NEW, rx, false), Ok(()));
        assert_eq!(w.timestamping(SO_TIMESTAMPING_NEW), rx);
        // Reporting without taking stamps, or taking without reporting:
        // nothing to send.
        assert_eq!(
            w.set_timestamping(SO_TIMESTAMPING, SOF_RX_SOFTWARE, false),
            Ok(())
        );
        assert!(!w.any());
        let filter = SOF_SOFTWARE | SOF_OPT_RX_FILTER;
        assert_eq!(w.set_timestamping(SO_TIMESTAMPING, filter, false), Ok(()));
        assert!(w.set(SOL_SOCKET, SO_TIMESTAMP, true));
        assert_eq!(messages(&w, &arrival(), true, false).len(), 1);
    }

    #[test]
    fn scm_timestamping_follows_so_timestamp_with_three_timespecs() {
        let w = RecvCmsgs::default();
        assert!(w.set(SOL_SOCKET, SO_TIMESTAMPNS, true));
        let rx = SOF_RX_SOFTWARE | SOF_SOFTWARE;
        assert_eq!(w.set_timestamping(SO_TIMESTAMPING, rx, false), Ok(()));
        for datagram in [true, false] {
            let m = messages(&w, &arrival(), datagram, false);
            let kinds: Vec<_> = m.iter().map(|c| (c.level, c.ty, c.data.len())).collect();
            assert_eq!(
                kinds,
                [
                    (SOL_SOCKET, SO_TIMESTAMPNS, 16),
                    (SOL_SOCKET, SO_TIMESTAMPING, 48)
                ]
            );
            assert_eq!(m[1].data[..16], m[0].data[..]);
            assert!(m[1].data[16..].iter().all(|&b| b == 0));
        }
        // The _NEW option: the _NEW message, for SO_TIMESTAMPNS too.
        assert_eq!(w.set_timestamping(SO_TIMESTAMPING_NEW, rx, false), Ok(()));
        let m = messages(&w, &arrival(), true, false);
        assert_eq!(
            (m[0].ty, m[1].ty),
            (SO_TIMESTAMPNS_NEW, SO_TIMESTAMPING_NEW)
        );
        // Inherited by an accepted socket.
        assert_eq!(w.clone().timestamping(SO_TIMESTAMPING_NEW), rx);
    }

    #[test]
    fn pkt_options_are_ints_in_flag_order() {
        let w = all_v4();
        let p = netstack::PktOptions {
            local: Ipv4Addr::LOCALHOST,
            ifindex: 1,
            ttl: 33,
            tos: 0xb8,
        };
        let m = pkt_options(&w, &p);
        let kinds: Vec<_> = m.iter().map(|c| (c.ty, c.data.len())).collect();
        assert_eq!(kinds, [(IP_PKTINFO, 12), (IP_TTL, 4), (IP_TOS, 4)]);
        assert_eq!(m[2].data, 0xb8i32.to_ne_bytes());
        assert!(pkt_options(&RecvCmsgs::default(), &p).is_empty());
    }

    #[test]
    fn messages_come_in_linux_order_with_linux_sizes() {
        let m = messages(&all_v4(), &arrival(), true, false);
        let kinds: Vec<_> = m.iter().map(|c| (c.level, c.ty, c.data.len())).collect();
        assert_eq!(
            kinds,
            [
                (SOL_SOCKET, SO_TIMESTAMP, 16),
                (IPPROTO_IP, IP_PKTINFO, 12),
                (IPPROTO_IP, IP_TTL, 4),
                (IPPROTO_IP, IP_TOS, 1),
            ]
        );
        assert_eq!(&m[0].data[8..], &123_456i64.to_ne_bytes());
        // TCP: the timestamp alone.
        assert_eq!(messages(&all_v4(), &arrival(), false, false).len(), 1);
    }

    #[test]
    fn ipv6_datagrams_get_hop_limit_then_traffic_class_as_ints() {
        let w = RecvCmsgs::default();
        assert!(w.set(IPPROTO_IPV6, IPV6_RECVHOPLIMIT, true));
        assert!(w.set(IPPROTO_IPV6, IPV6_RECVTCLASS, true));
        assert_eq!(w.get(IPPROTO_IPV6, IPV6_RECVTCLASS), Some(true));
        let a = Arrival {
            dst: Some((IpAddr::V6(std::net::Ipv6Addr::LOCALHOST), 1)),
            hop_limit: Some(3),
            tos: Some(0x2d),
            ..Arrival::default()
        };
        let m = messages(&w, &a, true, true);
        assert_eq!(
            m,
            [
                cmsg(IPPROTO_IPV6, IPV6_HOPLIMIT, &3i32.to_ne_bytes()),
                cmsg(IPPROTO_IPV6, IPV6_TCLASS, &0x2di32.to_ne_bytes()),
            ]
        );
        // The host's copy of the message passes the checks.
        let (raw, _) = encode(&m, 4096);
        assert_eq!(parse_host(&raw), m);
    }

    #[test]
    fn extended_err_is_sock_extended_err_then_the_offender() {
        let e = netstack::QueuedError {
            errno: abi::Errno::ECONNREFUSED,
            icmp_type: 3,
            icmp_code: 3,
            offender: IpAddr::V4(Ipv4Addr::LOCALHOST),
            dest: "127.0.0.1:9".parse().expect("addr"),
            payload: b"x".to_vec(),
        };
        let m = extended_err(&e, false);
        assert_eq!((m.level, m.ty, m.data.len()), (IPPROTO_IP, IP_RECVERR, 32));
        assert_eq!(&m.data[..4], &111u32.to_ne_bytes());
        assert_eq!(&m.data[4..8], &[SO_EE_ORIGIN_ICMP, 3, 3, 0]);
        assert_eq!(&m.data[16..18], &2u16.to_ne_bytes());
        assert_eq!(&m.data[20..24], &[127, 0, 0, 1]);
        let e6 = netstack::QueuedError {
            icmp_type: 1,
            icmp_code: 4,
            offender: IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
            ..e
        };
        let m = extended_err(&e6, true);
        assert_eq!(
            (m.level, m.ty, m.data.len()),
            (IPPROTO_IPV6, IPV6_RECVERR, 44)
        );
        assert_eq!(&m.data[4..8], &[SO_EE_ORIGIN_ICMP6, 1, 4, 0]);
    }

    #[test]
    fn a_short_buffer_truncates_like_put_cmsg() {
        let m = messages(&all_v4(), &arrival(), true, false);
        let (full, f) = encode(&m, 4096);
        assert_eq!((full.len(), f), (32 + 32 + 24 + 24, 0));
        // Room for the timestamp and half the pktinfo message.
        let (b, f) = encode(&m, 32 + 20);
        assert_eq!((b.len(), f), (52, MSG_CTRUNC));
        assert_eq!(
            u64::from_ne_bytes(b[32..40].try_into().expect("8 bytes")),
            20
        );
        // Less than a header: nothing.
        let (b, f) = encode(&m, 15);
        assert_eq!((b.len(), f), (0, MSG_CTRUNC));
        // The last message's padding is cut to the room left.
        let (b, f) = encode(&m, 32 + 32 + 24 + 17);
        assert_eq!((b.len(), f), (105, 0));
    }

    #[test]
    fn host_messages_are_checked_and_rebuilt() {
        let good = messages(&all_v4(), &arrival(), true, false);
        let (raw, _) = encode(&good, 4096);
        assert_eq!(parse_host(&raw), good);
        // SCM_RIGHTS (never on an Internet socket) and unknown kinds are
        // dropped; a wrong size is dropped.
        let bad = [
            cmsg(SOL_SOCKET, 1, &7i32.to_ne_bytes()),
            cmsg(IPPROTO_IP, IP_TTL, &[1, 2]),
            cmsg(IPPROTO_IP, IP_TTL, &1000i32.to_ne_bytes()),
            cmsg(SOL_SOCKET, SO_TIMESTAMP, &[0; 12]),
            cmsg(IPPROTO_IPV6, IPV6_PKTINFO, &[0; 16]),
        ];
        let (raw, _) = encode(&bad, 4096);
        assert!(parse_host(&raw).is_empty());
        // A length pointing past the end stops the walk.
        let mut raw = raw;
        raw[..8].copy_from_slice(&4096u64.to_ne_bytes());
        assert!(parse_host(&raw).is_empty());
        assert!(parse_host(&[0u8; 7]).is_empty());
    }
}
