//! What a guest under `--network host` sees of its network: a snapshot of
//! the interfaces, addresses and routes of the runtime's network namespace
//! (the host's, or the container's in OCI mode), taken by rtnetlink dumps
//! in the sandbox's host process before the Sentry is confined. The Sentry
//! gets it as plain data and serves the guest's netlink dumps, interface
//! ioctls, `/proc/net` and `/sys/class/net` from it; it never asks the host
//! itself (its seccomp filter refuses netlink sockets).
//!
//! The snapshot is what was there when the sandbox started: interfaces or
//! addresses added later are not seen (traffic counters stay at zero).
//!
//! Under `--network sandbox` in OCI mode the same snapshot of the
//! container's namespace gives the guest the interface the engine put
//! there ([`sandbox_link`]): its addresses become the netstack's own.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use abi::netlink::{
    IFA_ADDRESS, IFA_BROADCAST, IFA_FLAGS, IFA_LOCAL, IFF_LOOPBACK, IFLA_ADDRESS, IFLA_IFNAME,
    IFLA_LINK, IFLA_MTU, IFLA_OPERSTATE, IFLA_QDISC, IFLA_TXQLEN, RTA_DST, RTA_GATEWAY, RTA_OIF,
    RTA_PREFSRC, RTA_PRIORITY, RTA_TABLE, RTM_GETADDR, RTM_GETLINK, RTM_GETROUTE, RTM_NEWADDR,
    RTM_NEWLINK, RTM_NEWROUTE, RTPROT_KERNEL, RT_SCOPE_UNIVERSE, RT_TABLE_MAIN,
};

use sentry::net::{attrs_of, IfAddr, Interface, NetTable, Route};

use crate::sys;

/// Bounds on what a snapshot keeps: far more than hosts have, so that a
/// strange host cannot make the Sentry's table (walked on every dump)
/// unbounded.
const MAX_INTERFACES: usize = 1024;
const MAX_ADDRESSES: usize = 4096;
const MAX_ROUTES: usize = 16384;

/// `RTM_F_CLONED`: a cached route, not one of the tables.
const RTM_F_CLONED: u32 = 0x200;
/// Longest interface name (`IFNAMSIZ` less its NUL).
const MAX_IFNAME: usize = 15;

const AF_INET: u8 = libc::AF_INET as u8;
const AF_INET6: u8 = libc::AF_INET6 as u8;

/// Takes the snapshot in the calling thread's network namespace.
pub fn snapshot() -> io::Result<NetTable> {
    let links = sys::rtnetlink_dump(RTM_GETLINK, &[0u8; 16])?;
    let addrs = sys::rtnetlink_dump(RTM_GETADDR, &[0u8; 8])?;
    let routes = sys::rtnetlink_dump(RTM_GETROUTE, &[0u8; 12])?;
    Ok(parse(&links, &addrs, &routes))
}

/// What the guest sees under `--network sandbox` in OCI mode, from the
/// snapshot `t` of the container's network namespace: its first interface
/// (in index order) that is not a loopback and has an IPv4 address, with
/// its name, index, MTU, MAC and flags, holding its IPv4 addresses and its
/// global IPv6 ones (at most [`netstack::MAX_LINK_ADDRS`], IPv4 first),
/// and the namespace's routes of the main table through it, but for those
/// Linux made from addresses (the guest's table makes them again from the
/// addresses it keeps). The second part is what the netstack owns: the
/// same addresses. `None` when the namespace has no such interface (the
/// guest then gets the default link, as with `do`).
pub fn sandbox_link(t: &NetTable) -> Option<(NetTable, netstack::Link)> {
    let mut link = t
        .interfaces
        .iter()
        .find(|i| i.flags & IFF_LOOPBACK == 0 && i.addrs.iter().any(|a| a.addr.is_ipv4()))?
        .clone();
    // Link-local IPv6 addresses stay out: the netstack has no use for
    // them (scoped, and never a relay's source).
    link.addrs
        .retain(|a| a.addr.is_ipv4() || a.scope == RT_SCOPE_UNIVERSE);
    link.addrs.sort_by_key(|a| a.addr.is_ipv6());
    let owned = netstack::Link {
        addrs: link.addrs.iter().map(|a| (a.addr, a.prefix)).collect(),
    };
    let usable: Vec<(IpAddr, u8)> = owned.usable().collect();
    link.addrs.retain(|a| usable.contains(&(a.addr, a.prefix)));
    let has = |v4: bool| link.addrs.iter().any(|a| a.addr.is_ipv4() == v4);
    let routes = t
        .routes
        .iter()
        .filter(|r| {
            r.table == RT_TABLE_MAIN
                && r.oif == link.index
                && r.protocol != RTPROT_KERNEL
                && has(r.dst.is_ipv4())
                && r.prefsrc
                    .is_none_or(|s| usable.iter().any(|&(a, _)| a == s))
        })
        .cloned()
        .collect();
    Some((
        NetTable::sandbox_link(link, routes),
        netstack::Link { addrs: usable },
    ))
}

/// The table the answers to the three dumps describe. Messages that do not
/// parse are left out.
fn parse(links: &[Vec<u8>], addrs: &[Vec<u8>], routes: &[Vec<u8>]) -> NetTable {
    let mut interfaces: Vec<Interface> = links
        .iter()
        .filter_map(|m| link(m))
        .take(MAX_INTERFACES)
        .collect();
    let mut kept = 0;
    for m in addrs {
        let Some((index, a)) = address(m) else {
            continue;
        };
        if kept == MAX_ADDRESSES {
            break;
        }
        if let Some(i) = interfaces.iter_mut().find(|i| i.index == index) {
            i.addrs.push(a);
            kept += 1;
        }
    }
    // IPv4 addresses first, then IPv6, as Linux's address dump lists them
    // (the dump is per family already; keep the order within each).
    for i in &mut interfaces {
        i.addrs.sort_by_key(|a| a.addr.is_ipv6());
    }
    let routes = routes
        .iter()
        .filter_map(|m| route(m))
        .take(MAX_ROUTES)
        .collect();
    NetTable { interfaces, routes }
}

/// The type and body of a whole netlink message.
fn body(m: &[u8]) -> Option<(u16, &[u8])> {
    let ty = u16::from_ne_bytes([*m.get(4)?, *m.get(5)?]);
    Some((ty, m.get(16..)?))
}

/// The attributes after a fixed header of `fixed` bytes: `(type, value)`.
fn attrs(body: &[u8], fixed: usize) -> Vec<(u16, &[u8])> {
    attrs_of(body.get(fixed..).unwrap_or(&[]))
}

fn u32_of(v: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(v.get(..4)?.try_into().ok()?))
}

fn ip_of(family: u8, v: &[u8]) -> Option<IpAddr> {
    match family {
        AF_INET => Some(IpAddr::V4(Ipv4Addr::from(
            <[u8; 4]>::try_from(v.get(..4)?).ok()?,
        ))),
        AF_INET6 => Some(IpAddr::V6(Ipv6Addr::from(
            <[u8; 16]>::try_from(v.get(..16)?).ok()?,
        ))),
        _ => None,
    }
}

/// An `RTM_NEWLINK` message: `struct ifinfomsg` and its attributes.
fn link(m: &[u8]) -> Option<Interface> {
    let (ty, b) = body(m)?;
    if ty != RTM_NEWLINK || b.len() < 16 {
        return None;
    }
    let hwtype = u16::from_ne_bytes([b[2], b[3]]);
    let index = i32::from_ne_bytes([b[4], b[5], b[6], b[7]]);
    let flags = u32::from_ne_bytes([b[8], b[9], b[10], b[11]]);
    let mut i = Interface {
        index,
        iflink: index,
        name: String::new(),
        mtu: 0,
        flags,
        hwtype,
        hwaddr: [0; 6],
        operstate: 0,
        txqlen: 0,
        qdisc: String::new(),
        addrs: Vec::new(),
    };
    let text = |v: &[u8]| {
        let v = v.split(|&c| c == 0).next().unwrap_or(v);
        String::from_utf8_lossy(v).into_owned()
    };
    for (t, v) in attrs(b, 16) {
        match t {
            IFLA_IFNAME => i.name = text(v),
            IFLA_MTU => i.mtu = u32_of(v)?,
            IFLA_LINK => i.iflink = u32_of(v)? as i32,
            IFLA_TXQLEN => i.txqlen = u32_of(v)?,
            IFLA_OPERSTATE => i.operstate = *v.first()?,
            IFLA_QDISC => i.qdisc = text(v),
            // The interface table keeps 6 bytes (Ethernet's length); a
            // longer hardware address is cut, a shorter one padded.
            IFLA_ADDRESS => {
                let n = v.len().min(6);
                i.hwaddr[..n].copy_from_slice(&v[..n]);
            }
            _ => {}
        }
    }
    // The name is what the guest looks interfaces up by, in fixed-size
    // ifreq buffers: without a usable one, the interface is left out.
    let usable = !i.name.is_empty()
        && i.name.len() <= MAX_IFNAME
        && !i.name.contains(['/', '\0'])
        && i.name != "."
        && i.name != "..";
    usable.then_some(i)
}

/// An `RTM_NEWADDR` message: the interface's index and the address.
fn address(m: &[u8]) -> Option<(i32, IfAddr)> {
    let (ty, b) = body(m)?;
    if ty != RTM_NEWADDR || b.len() < 8 {
        return None;
    }
    let (family, prefix, flags8, scope) = (b[0], b[1], b[2], b[3]);
    let index = u32::from_ne_bytes([b[4], b[5], b[6], b[7]]) as i32;
    let (mut address, mut local, mut broadcast) = (None, None, None);
    let mut flags = u32::from(flags8);
    for (t, v) in attrs(b, 8) {
        match t {
            IFA_ADDRESS => address = ip_of(family, v),
            // An IPv4 address's own is IFA_LOCAL (IFA_ADDRESS is the peer's
            // on a point-to-point link).
            IFA_LOCAL => local = ip_of(family, v),
            IFA_BROADCAST => broadcast = ip_of(family, v),
            IFA_FLAGS => flags = u32_of(v)?,
            _ => {}
        }
    }
    let addr = local.or(address)?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if prefix > max {
        return None;
    }
    let broadcast = match broadcast {
        Some(IpAddr::V4(b)) => Some(b),
        _ => None,
    };
    Some((
        index,
        IfAddr {
            addr,
            prefix,
            scope,
            flags,
            broadcast,
        },
    ))
}

/// An `RTM_NEWROUTE` message of an IPv4 or IPv6 table.
fn route(m: &[u8]) -> Option<Route> {
    let (ty, b) = body(m)?;
    if ty != RTM_NEWROUTE || b.len() < 12 {
        return None;
    }
    let (family, dst_len, table8, protocol, scope, kind) = (b[0], b[1], b[4], b[5], b[6], b[7]);
    let flags = u32::from_ne_bytes([b[8], b[9], b[10], b[11]]);
    if flags & RTM_F_CLONED != 0 {
        return None;
    }
    let unspecified = match family {
        AF_INET => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        AF_INET6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        _ => return None,
    };
    let mut r = Route {
        table: table8,
        kind,
        dst: unspecified,
        dst_len,
        oif: 0,
        scope,
        protocol,
        prefsrc: None,
        priority: None,
        gateway: None,
    };
    for (t, v) in attrs(b, 12) {
        match t {
            RTA_DST => r.dst = ip_of(family, v)?,
            RTA_OIF => r.oif = u32_of(v)? as i32,
            RTA_GATEWAY => r.gateway = ip_of(family, v),
            RTA_PRIORITY => r.priority = Some(u32_of(v)?),
            RTA_PREFSRC => r.prefsrc = ip_of(family, v),
            // Tables past 255 show as RT_TABLE_COMPAT in rtm_table; the
            // table keeps a byte, as rtm_table does.
            RTA_TABLE => r.table = u8::try_from(u32_of(v)?).unwrap_or(table8),
            _ => {}
        }
    }
    let max = if r.dst.is_ipv4() { 32 } else { 128 };
    (r.dst_len <= max).then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(ty: u16, v: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&((4 + v.len()) as u16).to_ne_bytes());
        a.extend_from_slice(&ty.to_ne_bytes());
        a.extend_from_slice(v);
        a.resize((a.len() + 3) & !3, 0);
        a
    }

    fn message(ty: u16, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(body);
        m
    }

    #[test]
    fn dumps_become_the_table() {
        let mut l = vec![0, 0];
        l.extend_from_slice(&1u16.to_ne_bytes());
        l.extend_from_slice(&3i32.to_ne_bytes());
        l.extend_from_slice(&0x10083u32.to_ne_bytes());
        l.extend_from_slice(&0u32.to_ne_bytes());
        l.extend(attr(IFLA_IFNAME, b"dummy0\0"));
        l.extend(attr(IFLA_MTU, &1500u32.to_ne_bytes()));
        l.extend(attr(IFLA_ADDRESS, &[2, 3, 4, 5, 6, 7]));
        l.extend(attr(IFLA_QDISC, b"noqueue\0"));
        l.extend(attr(IFLA_TXQLEN, &1000u32.to_ne_bytes()));
        let mut bad_name = l.clone();
        bad_name.truncate(16);
        bad_name.extend(attr(IFLA_IFNAME, b"a-name-too-long-for-ifreq\0"));

        let mut a = vec![AF_INET, 24, 0x80, 0];
        a.extend_from_slice(&3u32.to_ne_bytes());
        a.extend(attr(IFA_ADDRESS, &[192, 0, 2, 5]));
        a.extend(attr(IFA_LOCAL, &[192, 0, 2, 5]));
        let mut a6 = vec![AF_INET6, 64, 0x80, 253];
        a6.extend_from_slice(&3u32.to_ne_bytes());
        let fe80: Ipv6Addr = "fe80::1".parse().expect("v6");
        a6.extend(attr(IFA_ADDRESS, &fe80.octets()));
        let mut stray = a.clone();
        stray[4] = 9;

        let mut r = vec![AF_INET, 0, 0, 0, 254, 3, 0, 1];
        r.extend_from_slice(&0u32.to_ne_bytes());
        r.extend(attr(RTA_TABLE, &254u32.to_ne_bytes()));
        r.extend(attr(RTA_GATEWAY, &[192, 0, 2, 1]));
        r.extend(attr(RTA_OIF, &3i32.to_ne_bytes()));
        let mut cloned = r.clone();
        cloned[8..12].copy_from_slice(&RTM_F_CLONED.to_ne_bytes());
        let mut long_prefix = r.clone();
        long_prefix[1] = 33;

        let t = parse(
            &[
                message(RTM_NEWLINK, &l),
                message(RTM_NEWLINK, &bad_name),
                vec![1, 2, 3],
            ],
            &[
                message(RTM_NEWADDR, &a6),
                message(RTM_NEWADDR, &a),
                message(RTM_NEWADDR, &stray),
            ],
            &[
                message(RTM_NEWROUTE, &r),
                message(RTM_NEWROUTE, &cloned),
                message(RTM_NEWROUTE, &long_prefix),
            ],
        );
        assert_eq!(t.interfaces.len(), 1);
        let i = &t.interfaces[0];
        assert_eq!(
            (i.index, i.name.as_str(), i.mtu, i.flags),
            (3, "dummy0", 1500, 0x10083)
        );
        assert_eq!(
            (i.hwaddr, i.qdisc.as_str(), i.txqlen),
            ([2, 3, 4, 5, 6, 7], "noqueue", 1000)
        );
        let got: Vec<(String, u8, u8)> = i
            .addrs
            .iter()
            .map(|a| (a.addr.to_string(), a.prefix, a.scope))
            .collect();
        assert_eq!(
            got,
            [("192.0.2.5".into(), 24, 0), ("fe80::1".into(), 64, 253)]
        );
        assert_eq!(t.routes.len(), 1);
        let r = &t.routes[0];
        assert_eq!(r.gateway, Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1))));
        assert_eq!((r.dst_len, r.oif, r.table), (0, 3, 254));
    }

    fn iface(index: i32, name: &str, flags: u32, addrs: &[(&str, u8, u8)]) -> Interface {
        Interface {
            index,
            iflink: index + 10,
            name: name.into(),
            mtu: 1450,
            flags,
            hwtype: 1,
            hwaddr: [2, 0x42, 0xc0, 0, 2, 10],
            operstate: 6,
            txqlen: 1000,
            qdisc: "noqueue".into(),
            addrs: addrs
                .iter()
                .map(|&(a, prefix, scope)| IfAddr {
                    addr: a.parse().expect("address"),
                    prefix,
                    scope,
                    flags: 0x80,
                    broadcast: None,
                })
                .collect(),
        }
    }

    fn route(dst: &str, len: u8, oif: i32, protocol: u8, gw: Option<&str>) -> Route {
        Route {
            table: RT_TABLE_MAIN,
            kind: 1,
            dst: dst.parse().expect("dst"),
            dst_len: len,
            oif,
            scope: if gw.is_some() { 0 } else { 253 },
            protocol,
            prefsrc: None,
            priority: None,
            gateway: gw.map(|g| g.parse().expect("gateway")),
        }
    }

    #[test]
    fn sandbox_link_is_the_first_interface_with_ipv4() {
        let snapshot = NetTable {
            interfaces: vec![
                iface(
                    1,
                    "lo",
                    0x10049,
                    &[("127.0.0.1", 8, 254), ("::1", 128, 254)],
                ),
                // Up, but only a link-local IPv6 address: passed over.
                iface(2, "dummy0", 0x10043, &[("fe80::1", 64, 253)]),
                iface(
                    5,
                    "eth0",
                    0x11043,
                    &[
                        ("fe80::42:c0ff:fe00:20a", 64, 253),
                        ("2001:db8::10", 64, 0),
                        ("192.0.2.10", 24, 0),
                    ],
                ),
                iface(6, "eth1", 0x11043, &[("198.51.100.7", 24, 0)]),
            ],
            routes: vec![
                route("0.0.0.0", 0, 5, 3, Some("192.0.2.1")),
                route("192.0.2.0", 24, 5, RTPROT_KERNEL, None),
                route("198.51.100.0", 24, 6, RTPROT_KERNEL, None),
                route("203.0.113.0", 24, 6, 3, Some("198.51.100.1")),
                route("fe80::", 64, 5, RTPROT_KERNEL, None),
                route("::", 0, 5, 9, Some("fe80::1")),
            ],
        };
        let (t, link) = sandbox_link(&snapshot).expect("an interface");
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        assert_eq!(
            link.addrs,
            [(ip("192.0.2.10"), 24), (ip("2001:db8::10"), 64)]
        );
        let names: Vec<(i32, &str, u32)> = t
            .interfaces
            .iter()
            .map(|i| (i.index, i.name.as_str(), i.mtu))
            .collect();
        assert_eq!(names, [(1, "lo", 65536), (5, "eth0", 1450)]);
        let eth = &t.interfaces[1];
        assert_eq!((eth.iflink, eth.hwaddr), (15, [2, 0x42, 0xc0, 0, 2, 10]));
        let addrs: Vec<IpAddr> = eth.addrs.iter().map(|a| a.addr).collect();
        assert_eq!(addrs, [ip("192.0.2.10"), ip("2001:db8::10")]);
        // The main table: the gateways through eth0 and the routes of the
        // kept addresses; nothing through eth1, no fe80::/64.
        let main: Vec<String> = t
            .routes
            .iter()
            .filter(|r| r.table == RT_TABLE_MAIN)
            .map(|r| format!("{}/{} {:?} dev {}", r.dst, r.dst_len, r.gateway, r.oif))
            .collect();
        assert_eq!(
            main,
            [
                "0.0.0.0/0 Some(192.0.2.1) dev 5",
                "192.0.2.0/24 None dev 5",
                "2001:db8::/64 None dev 5",
                "::/0 Some(fe80::1) dev 5",
            ]
        );
        // Only loopback: no view of its own.
        let lo_only = NetTable {
            interfaces: snapshot.interfaces[..2].to_vec(),
            routes: vec![],
        };
        assert!(sandbox_link(&lo_only).is_none());
    }

    #[test]
    fn garbage_parses_to_nothing() {
        let mut x: u32 = 7;
        for len in 0..300 {
            let junk: Vec<u8> = (0..len)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (x >> 16) as u8
                })
                .collect();
            let one = std::slice::from_ref(&junk);
            let _ = parse(one, one, one);
        }
    }

    #[test]
    fn the_live_namespace_has_loopback() {
        let t = snapshot().expect("snapshot");
        let lo = t.interfaces.iter().find(|i| i.name == "lo").expect("lo");
        assert_eq!(lo.hwtype, 772);
    }
}
