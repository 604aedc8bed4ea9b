//! The guest's network devices, addresses and routes ([`NetTable`]): what
//! rtnetlink, the interface ioctls, `/sys/class/net` and `/proc/net` show.
//! Set once at start-up from the sandbox's network; the guest cannot
//! change it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, RwLock};

use abi::netlink::{
    ARPHRD_ETHER, ARPHRD_LOOPBACK, IFF_LOOPBACK, IF_OPER_UNKNOWN, IF_OPER_UP, RTPROT_KERNEL,
    RT_SCOPE_UNIVERSE, RT_TABLE_MAIN,
};
use abi::netlink::{
    IFA_F_PERMANENT, IFF_BROADCAST, IFF_LOWER_UP, IFF_MULTICAST, IFF_RUNNING, IFF_UP,
    RTN_BROADCAST, RTN_LOCAL, RTN_MULTICAST, RTN_UNICAST, RTPROT_BOOT, RT_SCOPE_HOST,
    RT_SCOPE_LINK, RT_TABLE_LOCAL,
};

/// One network interface the guest sees.
#[derive(Clone, Debug)]
pub struct Interface {
    pub index: i32,
    /// The index of the device it is tied to (a veth's peer), or its own
    /// (`dev_get_iflink()`).
    pub iflink: i32,
    pub name: String,
    pub mtu: u32,
    /// `IFF_*` flags, as netlink reports them (with `IFF_RUNNING` and
    /// `IFF_LOWER_UP`).
    pub flags: u32,
    /// `ARPHRD_*` hardware type.
    pub hwtype: u16,
    pub hwaddr: [u8; 6],
    /// `IF_OPER_*`
    pub operstate: u8,
    /// `txqueuelen`
    pub txqlen: u32,
    /// The queueing discipline's name (`IFLA_QDISC`).
    pub qdisc: String,
    pub addrs: Vec<IfAddr>,
}

/// One address of an interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfAddr {
    pub addr: IpAddr,
    pub prefix: u8,
    /// `RT_SCOPE_*`
    pub scope: u8,
    /// `IFA_F_*`
    pub flags: u32,
    /// The IPv4 broadcast address it was given, if any (`IFA_BROADCAST`).
    pub broadcast: Option<Ipv4Addr>,
}

impl IfAddr {
    /// A permanent address as Linux gives one added by hand: host scope
    /// on a loopback, global elsewhere; no broadcast address.
    fn permanent(addr: IpAddr, prefix: u8, loopback: bool) -> IfAddr {
        IfAddr {
            addr,
            prefix,
            scope: if loopback {
                RT_SCOPE_HOST
            } else {
                RT_SCOPE_UNIVERSE
            },
            flags: IFA_F_PERMANENT,
            broadcast: None,
        }
    }
}

/// `txqueuelen` of the sandbox's interfaces (Linux's default for both `lo`
/// and Ethernet-like devices).
pub const TXQLEN: u32 = 1000;

/// One route of the guest's routing tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// `RT_TABLE_MAIN` or `RT_TABLE_LOCAL`
    pub table: u8,
    /// `RTN_*`
    pub kind: u8,
    pub dst: IpAddr,
    pub dst_len: u8,
    /// the interface's index
    pub oif: i32,
    /// `RT_SCOPE_*`
    pub scope: u8,
    /// `RTPROT_*`
    pub protocol: u8,
    /// the source address Linux names for routes it made from an address
    pub prefsrc: Option<IpAddr>,
    /// the metric (IPv6 routes always carry one; IPv4 ones only when set)
    pub priority: Option<u32>,
    /// the next hop, for a route through a gateway
    pub gateway: Option<IpAddr>,
}

impl Route {
    /// A route of the main IPv4 table to a unicast destination: what
    /// `/proc/net/route` lists.
    pub fn is_main_v4_unicast(&self) -> bool {
        self.table == RT_TABLE_MAIN && self.kind == RTN_UNICAST && self.dst.is_ipv4()
    }
}

/// What the guest sees of its network: interfaces and routes. Fixed for
/// the life of the sandbox (nothing can change them from inside). With
/// `--network host` it is a snapshot of the host's, taken by the runtime
/// before the Sentry was confined (the Sentry cannot ask the host); with
/// `--network sandbox` in OCI mode, the container's interface from such a
/// snapshot ([`NetTable::sandbox_link`]).
#[derive(Clone, Debug)]
pub struct NetTable {
    pub interfaces: Vec<Interface>,
    /// In the order a dump lists them.
    pub routes: Vec<Route>,
}

/// The flags of `lo`.
const LO_FLAGS: u32 = IFF_UP | IFF_LOOPBACK | IFF_RUNNING | IFF_LOWER_UP;
/// The flags of an Ethernet-like interface.
const ETH_FLAGS: u32 = IFF_UP | IFF_BROADCAST | IFF_RUNNING | IFF_MULTICAST | IFF_LOWER_UP;

/// The sandbox's interface to the outside in `--network sandbox`.
pub const SANDBOX_IFNAME: &str = "eth0";
/// Its prefix lengths: the netstack's address is alone on its link (the
/// relays carry everything else), in a network the size Docker and QEMU
/// give such links.
const SANDBOX_PREFIX_V4: u8 = 24;
const SANDBOX_PREFIX_V6: u8 = 64;

impl NetTable {
    /// `--network none`: loopback only.
    pub fn loopback() -> NetTable {
        NetTable::new(vec![lo()], None)
    }

    /// `--network sandbox`: loopback plus `eth0`, holding the netstack's
    /// own address on its link out (the address `getsockname` shows on a
    /// connection out) and the default routes through it. There is no
    /// gateway: the netstack hands every allowed destination to a relay,
    /// so the link is all the route needs to name.
    pub fn sandbox(v4: Ipv4Addr, v6: Ipv6Addr) -> NetTable {
        let o = v4.octets();
        // A locally administered MAC made from the address, as Docker does.
        let eth = Interface {
            index: 2,
            iflink: 2,
            name: SANDBOX_IFNAME.into(),
            mtu: 1500,
            flags: ETH_FLAGS,
            hwtype: ARPHRD_ETHER,
            hwaddr: [0x02, 0x42, o[0], o[1], o[2], o[3]],
            operstate: IF_OPER_UP,
            txqlen: TXQLEN,
            qdisc: "noqueue".into(),
            addrs: vec![
                IfAddr::permanent(IpAddr::V4(v4), SANDBOX_PREFIX_V4, false),
                IfAddr::permanent(IpAddr::V6(v6), SANDBOX_PREFIX_V6, false),
            ],
        };
        NetTable::new(vec![lo(), eth], Some(2))
    }

    /// `--network sandbox` in OCI mode: loopback plus the interface the
    /// engine put in the container's network namespace, as the runtime
    /// found it there and holding only the addresses the netstack owns,
    /// with the routes Linux makes for those addresses and `routes` (the
    /// namespace's other routes through it, such as the default route
    /// through its gateway). Its index stays the one the namespace gave it.
    pub fn sandbox_link(link: Interface, routes: Vec<Route>) -> NetTable {
        NetTable::with_routes(vec![lo(), link], routes)
    }

    /// The table of `interfaces` with the routes Linux makes for their
    /// addresses, plus default routes (IPv4 and IPv6) through interface
    /// `default_via` when given.
    fn new(interfaces: Vec<Interface>, default_via: Option<i32>) -> NetTable {
        let mut routes = Vec::new();
        if let Some(oif) = default_via {
            routes.push(Route {
                table: RT_TABLE_MAIN,
                kind: RTN_UNICAST,
                dst: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                dst_len: 0,
                oif,
                scope: RT_SCOPE_LINK,
                protocol: RTPROT_BOOT,
                prefsrc: None,
                priority: None,
                gateway: None,
            });
            routes.push(Route {
                table: RT_TABLE_MAIN,
                kind: RTN_UNICAST,
                dst: IpAddr::V6(Ipv6Addr::UNSPECIFIED),
                dst_len: 0,
                oif,
                scope: RT_SCOPE_UNIVERSE,
                protocol: RTPROT_BOOT,
                prefsrc: None,
                priority: Some(1024),
                gateway: None,
            });
        }
        NetTable::with_routes(interfaces, routes)
    }

    /// The table of `interfaces` with the routes Linux makes for their
    /// addresses and `extra`, in the order a dump lists them.
    fn with_routes(interfaces: Vec<Interface>, extra: Vec<Route>) -> NetTable {
        let mut routes = Vec::new();
        for i in &interfaces {
            let lo = i.flags & IFF_LOOPBACK != 0;
            for a in &i.addrs {
                let multicast = i.flags & IFF_MULTICAST != 0;
                kernel_routes(&mut routes, i.index, lo, multicast, a.addr, a.prefix);
            }
        }
        routes.extend(extra);
        routes.dedup();
        // Dump order: IPv4 then IPv6; per family the main table, then the
        // local one (the order of their hash buckets); IPv4 routes by
        // address then prefix (the FIB trie's walk); IPv6 routes likewise
        // but the default last (where the fib6 tree walk finds it).
        routes.sort_by_key(|r| {
            (
                r.dst.is_ipv6(),
                r.table,
                r.dst.is_ipv6() && r.dst_len == 0,
                r.dst,
                r.dst_len,
            )
        });
        routes.dedup();
        NetTable { interfaces, routes }
    }

    /// The interface with index `index`.
    pub fn by_index(&self, index: i32) -> Option<&Interface> {
        self.interfaces.iter().find(|i| i.index == index)
    }

    /// The interface named `name`.
    pub fn by_name(&self, name: &[u8]) -> Option<&Interface> {
        self.interfaces.iter().find(|i| i.name.as_bytes() == name)
    }

    /// The route a packet to `dst` takes: the local table first, then the
    /// main one; the longest prefix, then the lowest metric.
    pub(crate) fn route_to(&self, dst: IpAddr) -> Option<&Route> {
        [RT_TABLE_LOCAL, RT_TABLE_MAIN]
            .into_iter()
            .find_map(|table| {
                self.routes
                    .iter()
                    .filter(|r| {
                        r.table == table
                            && r.dst.is_ipv4() == dst.is_ipv4()
                            && netstack::IpNet::new(r.dst, r.dst_len)
                                .is_some_and(|n| n.contains(dst))
                    })
                    .min_by_key(|r| (std::cmp::Reverse(r.dst_len), r.priority.unwrap_or(0)))
            })
    }

    /// The source address for a route that names none: the first address
    /// of the family on the route's interface.
    pub(crate) fn source_on(&self, oif: i32, dst: IpAddr) -> Option<IpAddr> {
        self.by_index(oif)?
            .addrs
            .iter()
            .map(|a| a.addr)
            .find(|a| a.is_ipv4() == dst.is_ipv4())
    }

    /// Whether `a` is one of the interfaces' addresses, or an IPv4
    /// address a local route makes the host's (all of 127.0.0.0/8), as
    /// Linux's `__ip_dev_find` looks a source up.
    pub(crate) fn is_local(&self, a: IpAddr) -> bool {
        self.interfaces
            .iter()
            .any(|i| i.addrs.iter().any(|x| x.addr == a))
            || (a.is_ipv4()
                && self
                    .route_to(a)
                    .is_some_and(|r| r.table == RT_TABLE_LOCAL && r.kind == RTN_LOCAL))
    }
}

fn lo() -> Interface {
    Interface {
        index: 1,
        iflink: 1,
        name: "lo".into(),
        mtu: 65536,
        flags: LO_FLAGS,
        hwtype: ARPHRD_LOOPBACK,
        hwaddr: [0; 6],
        operstate: IF_OPER_UNKNOWN,
        txqlen: TXQLEN,
        qdisc: "noqueue".into(),
        addrs: vec![
            IfAddr::permanent(IpAddr::V4(Ipv4Addr::LOCALHOST), 8, true),
            IfAddr::permanent(IpAddr::V6(Ipv6Addr::LOCALHOST), 128, true),
        ],
    }
}

/// The routes Linux adds for address `a/p` of interface `oif`
/// (`fib_add_ifaddr()` for IPv4, `addrconf` for IPv6).
fn kernel_routes(out: &mut Vec<Route>, oif: i32, lo: bool, multicast: bool, a: IpAddr, p: u8) {
    let route = |table, kind, dst, dst_len, scope, prefsrc, priority| Route {
        table,
        kind,
        dst,
        dst_len,
        oif,
        scope,
        protocol: RTPROT_KERNEL,
        prefsrc,
        priority,
        gateway: None,
    };
    match a {
        IpAddr::V4(v4) => {
            let src = Some(a);
            let mask = u32::MAX.checked_shl(32 - u32::from(p.min(32))).unwrap_or(0);
            let net = IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask));
            let bcast = IpAddr::V4(Ipv4Addr::from(u32::from(v4) | !mask));
            out.push(route(
                RT_TABLE_LOCAL,
                RTN_LOCAL,
                a,
                32,
                RT_SCOPE_HOST,
                src,
                None,
            ));
            if p < 32 {
                if lo {
                    // On a loopback the whole prefix is local.
                    out.push(route(
                        RT_TABLE_LOCAL,
                        RTN_LOCAL,
                        net,
                        p,
                        RT_SCOPE_HOST,
                        src,
                        None,
                    ));
                } else {
                    out.push(route(
                        RT_TABLE_MAIN,
                        RTN_UNICAST,
                        net,
                        p,
                        RT_SCOPE_LINK,
                        src,
                        None,
                    ));
                }
            }
            if p < 31 {
                out.push(route(
                    RT_TABLE_LOCAL,
                    RTN_BROADCAST,
                    bcast,
                    32,
                    RT_SCOPE_LINK,
                    src,
                    None,
                ));
            }
        }
        IpAddr::V6(v6) => {
            out.push(route(
                RT_TABLE_LOCAL,
                RTN_LOCAL,
                a,
                128,
                RT_SCOPE_UNIVERSE,
                None,
                Some(0),
            ));
            if !lo && p < 128 {
                let mask = u128::MAX.checked_shl(128 - u32::from(p)).unwrap_or(0);
                let net = IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask));
                out.push(route(
                    RT_TABLE_MAIN,
                    RTN_UNICAST,
                    net,
                    p,
                    RT_SCOPE_UNIVERSE,
                    None,
                    Some(256),
                ));
            }
            if multicast {
                let ff00 = IpAddr::V6(Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0));
                out.push(route(
                    RT_TABLE_LOCAL,
                    RTN_MULTICAST,
                    ff00,
                    8,
                    RT_SCOPE_UNIVERSE,
                    None,
                    Some(256),
                ));
            }
        }
    }
}

/// The sandbox's table (set once when the kernel starts; loopback only
/// until then).
static TABLE: RwLock<Option<Arc<NetTable>>> = RwLock::new(None);

/// The guest's interfaces and routes.
pub fn table() -> Arc<NetTable> {
    if let Some(t) = &*TABLE.read().unwrap_or_else(|e| e.into_inner()) {
        return t.clone();
    }
    static LOOPBACK: std::sync::LazyLock<Arc<NetTable>> =
        std::sync::LazyLock::new(|| Arc::new(NetTable::loopback()));
    LOOPBACK.clone()
}

/// Makes `t` what the guest sees (once per Sentry, at start-up).
pub fn set_table(t: NetTable) {
    *TABLE.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(t));
}
