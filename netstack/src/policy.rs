//! Egress policy: which destinations outside the sandbox a guest may reach.
//!
//! Default deny. A destination is allowed by a CIDR rule (optionally limited
//! to one port) or by a host rule (`example.com`, `*.example.com`) matched
//! against the names the Sentry's DNS helper saw resolve to that address.
//!
//! Two classes of addresses get extra protection, because they are how a
//! guest escapes a sandbox without breaking it:
//!
//! * *sensitive* addresses (the host's loopback, link-local, cloud metadata
//!   endpoints, unspecified, multicast, broadcast, and the host's own
//!   addresses given by [`Policy::with_host_addresses`]) are denied unless a
//!   CIDR rule names them explicitly, i.e. the rule's network lies inside
//!   the sensitive range (`169.254.169.254/32` names the metadata server,
//!   `0.0.0.0/0` does not; a host address is named only by its own `/32`
//!   or `/128`);
//! * *internal* addresses (RFC 1918, CGNAT, IPv6 ULA) may be opened by a CIDR
//!   rule, never by a host rule alone: an allowed name that resolves to
//!   `10.0.0.5` is DNS rebinding, not permission.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;
use std::sync::Mutex;

use abi::Errno;

/// How many (name, address) resolutions the policy remembers. Bounded because
/// the guest drives DNS lookups; the oldest entries are forgotten first.
pub const MAX_RESOLUTIONS: usize = 4096;

/// An IP network in CIDR notation (`10.0.0.0/8`, `2001:db8::/32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

/// Why a CIDR string did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IpNetError {
    /// the address part is not an IP address
    #[error("invalid address in {0:?}")]
    Address(String),
    /// the prefix length is not a number within the address' width
    #[error("invalid prefix length in {0:?}")]
    Prefix(String),
}

impl IpNet {
    /// A network from an address and prefix length; host bits are cleared.
    /// Returns `None` when the prefix is longer than the address.
    pub fn new(addr: IpAddr, prefix: u8) -> Option<IpNet> {
        let width = match addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        if prefix > width {
            return None;
        }
        let addr = match addr {
            IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask32(prefix))),
            IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask128(prefix))),
        };
        Some(IpNet { addr, prefix })
    }

    /// A network holding exactly one address.
    pub fn host(addr: IpAddr) -> IpNet {
        let prefix = if addr.is_ipv4() { 32 } else { 128 };
        IpNet { addr, prefix }
    }

    /// The network address.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether `ip` lies in this network. IPv4-mapped IPv6 addresses count as
    /// the IPv4 address they carry.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                u32::from(ip) & mask32(self.prefix) == u32::from(net)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                u128::from(ip) & mask128(self.prefix) == u128::from(net)
            }
            _ => false,
        }
    }

    /// Whether every address of `other` lies in this network.
    pub fn contains_net(&self, other: &IpNet) -> bool {
        other.prefix >= self.prefix && self.contains(other.addr)
    }
}

fn mask32(prefix: u8) -> u32 {
    match prefix {
        0 => 0,
        p => u32::MAX << (32 - u32::from(p.min(32))),
    }
}

fn mask128(prefix: u8) -> u128 {
    match prefix {
        0 => 0,
        p => u128::MAX << (128 - u32::from(p.min(128))),
    }
}

impl FromStr for IpNet {
    type Err = IpNetError;

    /// Parses `addr/prefix`, or a bare address as a single-host network.
    fn from_str(s: &str) -> Result<IpNet, IpNetError> {
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr = IpAddr::from_str(a).map_err(|_| IpNetError::Address(s.to_string()))?;
        match p {
            None => Ok(IpNet::host(addr)),
            Some(p) => {
                let prefix = p
                    .parse::<u8>()
                    .map_err(|_| IpNetError::Prefix(s.to_string()))?;
                IpNet::new(addr, prefix).ok_or_else(|| IpNetError::Prefix(s.to_string()))
            }
        }
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// Parses an `--allow-cidr` rule: `CIDR` or `CIDR:PORT`, where an IPv6
/// address with a port is written in brackets (`[2001:db8::1]:443`,
/// `[2001:db8::]/32:443`) or with a prefix (`2001:db8::/32:443`).
pub fn parse_cidr_rule(s: &str) -> Result<(IpNet, Option<u16>), String> {
    let bad_port = || format!("{s:?}: the port after the network must be a number from 1 to 65535");
    let port = |p: &str| -> Result<u16, String> {
        match p.parse::<u16>() {
            Ok(0) | Err(_) => Err(bad_port()),
            Ok(p) => Ok(p),
        }
    };
    let (net, port) = if let Some(rest) = s.strip_prefix('[') {
        let (addr, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("{s:?}: missing ']'"))?;
        let (prefix, p) = match after.split_once(':') {
            Some((prefix, p)) => (prefix, Some(port(p)?)),
            None => (after, None),
        };
        (format!("{addr}{prefix}"), p)
    } else if let Some((net, prefix_port)) = s.split_once('/') {
        match prefix_port.split_once(':') {
            Some((prefix, p)) => (format!("{net}/{prefix}"), Some(port(p)?)),
            None => (s.to_string(), None),
        }
    } else if s.matches(':').count() == 1 {
        let (a, p) = s.split_once(':').unwrap_or((s, ""));
        (a.to_string(), Some(port(p)?))
    } else {
        (s.to_string(), None)
    };
    let net = IpNet::from_str(&net).map_err(|e| format!("{s:?}: {e}"))?;
    Ok((net, port))
}

/// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) as the IPv4 address it is;
/// everything else unchanged. Rules are written and checked on this form, so
/// a guest cannot dodge an IPv4 rule by spelling the address in IPv6.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// Ranges no rule opens by accident (see the module docs).
const SENSITIVE: &[(&str, &str)] = &[
    ("0.0.0.0/8", "unspecified"),
    ("127.0.0.0/8", "host loopback"),
    ("169.254.0.0/16", "link-local / metadata"),
    ("100.100.100.200/32", "metadata (Alibaba)"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved / broadcast"),
    ("::/128", "unspecified"),
    ("::1/128", "host loopback"),
    ("fe80::/10", "link-local"),
    ("fd00:ec2::254/128", "metadata (AWS)"),
    ("ff00::/8", "multicast"),
];

/// Ranges a CIDR rule may open but a host rule may not (rebinding targets).
const INTERNAL: &[&str] = &[
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "100.64.0.0/10",
    "fc00::/7",
];

fn net(s: &str) -> IpNet {
    // The tables above are constants checked by `tables_parse` below; a typo
    // would fall back to a network that matches nothing usable.
    s.parse().unwrap_or(IpNet {
        addr: IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        prefix: 128,
    })
}

fn sensitive_range(ip: IpAddr) -> Option<(IpNet, &'static str)> {
    SENSITIVE
        .iter()
        .map(|(n, why)| (net(n), *why))
        .find(|(n, _)| n.contains(ip))
}

fn is_internal(ip: IpAddr) -> bool {
    INTERNAL.iter().any(|n| net(n).contains(ip))
}

/// The outcome of [`Policy::check`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The destination may be reached; `rule` names the rule that allowed
    /// it. `by_name`: only a host rule did, so the connection must name
    /// that host (TLS SNI or HTTP `Host`) before anything leaves.
    Allow { rule: String, by_name: bool },
    /// The destination may not be reached.
    Deny(DenyReason),
}

/// Why a destination was denied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DenyReason {
    /// No rule covers the destination (default deny).
    NoRule,
    /// A sensitive address (what kind is given) that no rule names explicitly.
    Sensitive(&'static str),
    /// A host rule matched, but the name resolved to an internal or sensitive
    /// address: DNS rebinding.
    Rebinding { name: String },
    /// The connection named a host that no rule allows, or one that did
    /// not resolve to this address (domain fronting).
    Fronting { name: String },
    /// The connection named no host (no SNI, no `Host`), or spoke another
    /// protocol than TLS or HTTP to an address allowed by name.
    Unnamed,
    /// `--deny-host` names the host.
    Denied { name: String },
    /// An `--allow-http` rule refuses the method or path.
    Http { name: String, method: String },
    /// On a connection the Sentry reads, a request it cannot check.
    BadRequest { name: String },
}

impl fmt::Display for DenyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DenyReason::NoRule => write!(f, "no --allow-cidr or --allow-host rule covers it"),
            DenyReason::Sensitive(what) => {
                write!(
                    f,
                    "{what} address, reachable only through a rule that names it"
                )
            }
            DenyReason::Rebinding { name } => write!(
                f,
                "{name} is allowed but resolved to an internal address (DNS rebinding)"
            ),
            DenyReason::Fronting { name } => write!(
                f,
                "the connection names {name}, which no --allow-host rule allows at this address"
            ),
            DenyReason::Unnamed => write!(
                f,
                "allowed by name only, and the connection named no host (TLS SNI or HTTP Host); \
                 other protocols need --allow-host NAME:PORT/tcp"
            ),
            DenyReason::Denied { name } => write!(f, "{name} is denied by --deny-host"),
            DenyReason::Http { name, method } => {
                write!(f, "{method} to {name} is not allowed by --allow-http")
            }
            DenyReason::BadRequest { name } => {
                write!(
                    f,
                    "a request to {name} that is not HTTP/1 the sandbox can check"
                )
            }
        }
    }
}

impl Decision {
    /// Whether the connection may proceed.
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow { .. })
    }

    /// The errno a denied `connect`/`sendto` returns: `ECONNREFUSED`, at
    /// once, as a firewall that rejects (rather than drops) makes Linux
    /// answer; programs then fail fast with a clear message.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Decision::Allow { .. } => None,
            Decision::Deny(_) => Some(Errno::ECONNREFUSED),
        }
    }
}

/// `--allow-host NAME` (HTTP and TLS naming NAME, any port) or
/// `--allow-host NAME:PORT/tcp` (any protocol, that port only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostRule {
    /// `example.com` or `*.example.com`, lower-case.
    pub pattern: String,
    pub port: Option<u16>,
}

impl HostRule {
    /// Parses `NAME` or `NAME:PORT/tcp` (the name is checked by the caller).
    pub fn parse(s: &str) -> Result<HostRule, String> {
        match s.split_once(':') {
            None => Ok(HostRule {
                pattern: normalize_name(s),
                port: None,
            }),
            Some((name, rest)) => {
                let port = rest
                    .strip_suffix("/tcp")
                    .and_then(|p| p.parse::<u16>().ok())
                    .filter(|&p| p != 0)
                    .ok_or_else(|| {
                        format!("{s:?}: after the name comes PORT/tcp (a port from 1 to 65535)")
                    })?;
                Ok(HostRule {
                    pattern: normalize_name(name),
                    port: Some(port),
                })
            }
        }
    }
}

/// `--allow-http HOST:METHOD,...[:/PATH,...]`: requests to HOST (HTTP, or
/// HTTPS through the Sentry's interception) with these methods, to targets
/// under these path prefixes (none given: any path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpRule {
    pub pattern: String,
    pub methods: Vec<String>,
    pub paths: Vec<String>,
}

impl HttpRule {
    /// Parses `HOST:METHOD,...[:/PATH,...]`.
    pub fn parse(s: &str) -> Result<HttpRule, String> {
        let mut parts = s.splitn(3, ':');
        let host = parts.next().unwrap_or("");
        let methods = parts.next().unwrap_or("");
        let paths = parts.next().unwrap_or("");
        let bad = |what: &str| format!("{s:?}: {what} (give HOST:GET,HEAD or HOST:GET:/path,...)");
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let methods: Vec<String> = methods
            .split(',')
            .filter(|m| !m.is_empty())
            .map(|m| m.trim().to_ascii_uppercase())
            .collect();
        if methods.is_empty()
            || methods
                .iter()
                .any(|m| !m.bytes().all(|b| b.is_ascii_uppercase()))
        {
            return Err(bad("the methods must be words such as GET"));
        }
        let paths: Vec<String> = paths
            .split(',')
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect();
        if paths.iter().any(|p| !p.starts_with('/')) {
            return Err(bad("each path prefix starts with /"));
        }
        Ok(HttpRule {
            pattern: normalize_name(host),
            methods,
            paths,
        })
    }

    fn allows(&self, method: &str, target: &str) -> bool {
        // An absolute-form target (a proxy request) is checked by its path.
        let path = match target.split_once("://") {
            Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
            None => target,
        };
        self.methods.iter().any(|m| m == method)
            && (self.paths.is_empty() || self.paths.iter().any(|p| path.starts_with(p.as_str())))
    }
}

/// A secret the guest sees only as its placeholder; the Sentry puts the
/// value in place of the placeholder in requests to its hosts.
pub struct Secret {
    /// The environment variable's name in the guest.
    pub name: String,
    /// What the guest's environment holds instead of the value: random,
    /// per sandbox.
    pub placeholder: String,
    value: Vec<u8>,
    /// Host patterns the value may go to.
    pub hosts: Vec<String>,
    /// Also put in place in request bodies (of a known length).
    pub in_body: bool,
}

impl Secret {
    pub fn new(name: String, placeholder: String, value: Vec<u8>, hosts: Vec<String>) -> Secret {
        Secret {
            name,
            placeholder,
            value,
            hosts: hosts.iter().map(|h| normalize_name(h)).collect(),
            in_body: false,
        }
    }

    /// The secret, put in place in request bodies too.
    pub fn in_bodies(mut self) -> Secret {
        self.in_body = true;
        self
    }

    /// The real value.
    pub fn value(&self) -> &[u8] {
        &self.value
    }

    /// Whether the value may go to `name`.
    pub fn goes_to(&self, name: &str) -> bool {
        self.hosts.iter().any(|p| host_matches(p, name))
    }
}

impl fmt::Debug for Secret {
    /// Never the value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secret")
            .field("name", &self.name)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        // Not left behind in freed heap memory (black_box keeps the
        // clearing from being optimised away).
        self.value.fill(0);
        std::hint::black_box(&self.value);
    }
}

/// The rules of a policy: fixed at start, changed only by
/// [`Policy::update`].
#[derive(Clone, Debug, Default)]
pub struct Rules {
    /// Networks that may be reached, each on one port or (`None`) all ports.
    pub allow_cidrs: Vec<(IpNet, Option<u16>)>,
    /// Host rules.
    pub allow_hosts: Vec<HostRule>,
    /// Host patterns refused whatever else allows them.
    pub deny_hosts: Vec<String>,
    /// HTTP method and path rules, per host.
    pub http: Vec<HttpRule>,
}

impl Rules {
    fn denied(&self, name: &str) -> bool {
        self.deny_hosts.iter().any(|p| host_matches(p, name))
    }

    /// Whether `name` may be named by a connection (any protocol if `port`
    /// is given and a `NAME:PORT/tcp` rule has it).
    fn name_allowed(&self, name: &str, port: Option<u16>) -> bool {
        if self.denied(name) {
            return false;
        }
        self.allow_hosts
            .iter()
            .any(|r| host_matches(&r.pattern, name) && (r.port.is_none() || r.port == port))
            || (port.is_none() && self.http.iter().any(|r| host_matches(&r.pattern, name)))
    }

    fn resolvable(&self, name: &str) -> bool {
        !self.denied(name)
            && (self
                .allow_hosts
                .iter()
                .any(|r| host_matches(&r.pattern, name))
                || self.http.iter().any(|r| host_matches(&r.pattern, name)))
    }

    fn raw_port(&self, name: &str, port: u16) -> bool {
        !self.denied(name)
            && self
                .allow_hosts
                .iter()
                .any(|r| r.port == Some(port) && host_matches(&r.pattern, name))
    }
}

/// The egress policy of one sandbox. Shared (`Arc`) between the stack and the
/// Sentry's DNS helper; the rules change only through [`Policy::update`].
#[derive(Debug, Default)]
pub struct Policy {
    rules: std::sync::RwLock<Rules>,
    /// The host's own addresses (canonical): services listening on them
    /// are the host's, not the network's.
    host_addrs: Vec<IpAddr>,
    secrets: Vec<Secret>,
    resolutions: Mutex<Resolutions>,
}

#[derive(Debug, Default)]
struct Resolutions {
    by_addr: HashMap<IpAddr, Vec<String>>,
    order: VecDeque<(IpAddr, String)>,
}

impl Policy {
    /// A policy with the given rules. Host rules are `NAME` or
    /// `NAME:PORT/tcp` (see [`HostRule`]); patterns are lower-cased and
    /// lose a trailing dot. Rules that do not parse are dropped (the
    /// runtime checks them first, with messages).
    pub fn new(allow_cidrs: Vec<(IpNet, Option<u16>)>, allow_hosts: Vec<String>) -> Policy {
        Policy {
            rules: std::sync::RwLock::new(Rules {
                allow_cidrs,
                allow_hosts: allow_hosts
                    .iter()
                    .filter_map(|h| HostRule::parse(h).ok())
                    .collect(),
                ..Rules::default()
            }),
            host_addrs: Vec::new(),
            secrets: Vec::new(),
            resolutions: Mutex::default(),
        }
    }

    /// The policy with `--allow-http` rules.
    pub fn with_http_rules(mut self, http: Vec<HttpRule>) -> Policy {
        self.set_http_rules(http);
        self
    }

    /// The policy with secrets to put in place of their placeholders.
    pub fn with_secrets(mut self, secrets: Vec<Secret>) -> Policy {
        self.set_secrets(secrets);
        self
    }

    /// Sets the `--allow-http` rules.
    pub fn set_http_rules(&mut self, http: Vec<HttpRule>) {
        self.rules_mut().http = http;
    }

    /// Sets the secrets.
    pub fn set_secrets(&mut self, secrets: Vec<Secret>) {
        self.secrets = secrets;
    }

    fn rules(&self) -> std::sync::RwLockReadGuard<'_, Rules> {
        self.rules.read().unwrap_or_else(|e| e.into_inner())
    }

    fn rules_mut(&self) -> std::sync::RwLockWriteGuard<'_, Rules> {
        self.rules.write().unwrap_or_else(|e| e.into_inner())
    }

    /// A copy of the rules now in force.
    pub fn current(&self) -> Rules {
        self.rules().clone()
    }

    /// Changes the rules for new connections: `allow` host rules are added
    /// (and lose any deny of the same pattern); `deny` patterns refuse
    /// their names from now on (and lose their allow rules).
    pub fn update(&self, allow: Vec<HostRule>, deny: Vec<String>) {
        let mut r = self.rules_mut();
        for a in allow {
            r.deny_hosts.retain(|d| *d != a.pattern);
            if !r.allow_hosts.contains(&a) {
                r.allow_hosts.push(a);
            }
        }
        for d in deny {
            let d = normalize_name(&d);
            r.allow_hosts.retain(|a| a.pattern != d);
            if !r.deny_hosts.contains(&d) {
                r.deny_hosts.push(d);
            }
        }
    }

    /// The secrets.
    pub fn secrets(&self) -> &[Secret] {
        &self.secrets
    }

    /// The policy, with `addrs` (the host's interface addresses) closed
    /// unless a rule names each one exactly.
    pub fn with_host_addresses(mut self, addrs: impl IntoIterator<Item = IpAddr>) -> Policy {
        for a in addrs {
            let a = canonical(a);
            if !self.host_addrs.contains(&a) {
                self.host_addrs.push(a);
            }
        }
        self
    }

    /// The default: nothing leaves the sandbox.
    pub fn deny_all() -> Policy {
        Policy::default()
    }

    /// Whether `name` matches one of the host rules (so the sandbox's DNS
    /// answers it).
    pub fn host_allowed(&self, name: &str) -> bool {
        self.rules().resolvable(&normalize_name(name))
    }

    /// Whether connections naming `name` pass through the Sentry's HTTP
    /// layer: it has secrets or `--allow-http` rules.
    pub fn inspects(&self, name: &str) -> bool {
        self.secrets.iter().any(|s| s.goes_to(name))
            || self
                .rules()
                .http
                .iter()
                .any(|r| host_matches(&r.pattern, name))
    }

    /// Whether a request to `name` with `method` and `target` may go out
    /// (`Err` says why not).
    pub fn check_request(&self, name: &str, method: &str, target: &str) -> Result<(), DenyReason> {
        let rules = self.rules();
        let mine: Vec<&HttpRule> = rules
            .http
            .iter()
            .filter(|r| host_matches(&r.pattern, name))
            .collect();
        if mine.is_empty() || mine.iter().any(|r| r.allows(method, target)) {
            return Ok(());
        }
        Err(DenyReason::Http {
            name: name.to_string(),
            method: method.to_string(),
        })
    }

    /// Records that `name` resolved to `addrs`, so that a later connection to
    /// one of them counts as a connection to `name`. Names that no host rule
    /// matches are not recorded (they could never allow anything).
    pub fn note_resolution(&self, name: &str, addrs: &[IpAddr]) {
        let name = normalize_name(name);
        if !self.host_allowed(&name) {
            return;
        }
        let mut r = self.resolutions.lock().unwrap_or_else(|e| e.into_inner());
        for &addr in addrs {
            let addr = canonical(addr);
            let names = r.by_addr.entry(addr).or_default();
            if names.contains(&name) {
                continue;
            }
            names.push(name.clone());
            r.order.push_back((addr, name.clone()));
            while r.order.len() > MAX_RESOLUTIONS {
                let Some((old_addr, old_name)) = r.order.pop_front() else {
                    break;
                };
                if let Some(v) = r.by_addr.get_mut(&old_addr) {
                    v.retain(|n| *n != old_name);
                    if v.is_empty() {
                        r.by_addr.remove(&old_addr);
                    }
                }
            }
        }
    }

    fn sensitive(&self, ip: IpAddr) -> Option<(IpNet, &'static str)> {
        sensitive_range(ip).or_else(|| {
            self.host_addrs
                .contains(&ip)
                .then(|| (IpNet::host(ip), "the host's own"))
        })
    }

    /// Decides whether the guest may reach `dest`. `resolved_from` is the
    /// name the caller (the Sentry, never the guest) itself resolved to
    /// `dest`; without it, names recorded by [`Policy::note_resolution`] for
    /// this address are used.
    pub fn check(&self, dest: SocketAddr, resolved_from: Option<&str>) -> Decision {
        let ip = canonical(dest.ip());
        let port = dest.port();
        let sensitive = self.sensitive(ip);
        let rules = self.rules();

        for (net, rule_port) in &rules.allow_cidrs {
            if !net.contains(ip) || rule_port.is_some_and(|p| p != port) {
                continue;
            }
            // A sensitive address needs a rule that names it: the rule's
            // network must lie inside the sensitive range.
            if let Some((range, _)) = &sensitive {
                if !range.contains_net(net) {
                    continue;
                }
            }
            let rule = match rule_port {
                Some(p) => format!("cidr {net} port {p}"),
                None => format!("cidr {net}"),
            };
            return Decision::Allow {
                rule,
                by_name: false,
            };
        }

        let names: Vec<String> = match resolved_from {
            Some(n) => vec![normalize_name(n)],
            None => self.names_of(ip),
        };
        let mut by_name = None;
        for name in &names {
            if rules.raw_port(name, port) {
                by_name = Some((name.clone(), false));
                break;
            }
            if by_name.is_none() && rules.name_allowed(name, None) {
                by_name = Some((name.clone(), true));
            }
        }
        if let Some((name, named)) = by_name {
            if sensitive.is_some() || is_internal(ip) {
                return Decision::Deny(DenyReason::Rebinding { name });
            }
            let rule = if named {
                format!("host {name}")
            } else {
                format!("host {name} port {port}/tcp")
            };
            return Decision::Allow {
                rule,
                by_name: named,
            };
        }

        if let Some(name) = names.into_iter().find(|n| rules.denied(n)) {
            return Decision::Deny(DenyReason::Denied { name });
        }
        match sensitive {
            Some((_, why)) => Decision::Deny(DenyReason::Sensitive(why)),
            None => Decision::Deny(DenyReason::NoRule),
        }
    }

    fn names_of(&self, ip: IpAddr) -> Vec<String> {
        let r = self.resolutions.lock().unwrap_or_else(|e| e.into_inner());
        r.by_addr.get(&ip).cloned().unwrap_or_default()
    }

    /// Decides a connection to `dest` that [`Policy::check`] allowed by
    /// name only, now that it named `name` (TLS SNI or HTTP `Host`; `None`:
    /// it named nothing): the name must be allowed and must have resolved
    /// to this address through the sandbox's DNS.
    pub fn check_name(&self, dest: SocketAddr, name: Option<&str>) -> Decision {
        let Some(name) = name.map(normalize_name) else {
            return Decision::Deny(DenyReason::Unnamed);
        };
        let ip = canonical(dest.ip());
        let rules = self.rules();
        if rules.denied(&name) {
            return Decision::Deny(DenyReason::Denied { name });
        }
        if !rules.name_allowed(&name, None) || !self.names_of(ip).contains(&name) {
            return Decision::Deny(DenyReason::Fronting { name });
        }
        if self.sensitive(ip).is_some() || is_internal(ip) {
            return Decision::Deny(DenyReason::Rebinding { name });
        }
        Decision::Allow {
            rule: format!("host {name}"),
            by_name: true,
        }
    }
}

fn normalize_name(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// `example.com` matches only itself; `*.example.com` matches any name with
/// at least one more label (`a.example.com`, `a.b.example.com`), not
/// `example.com` itself, as in TLS certificates and most egress proxies.
fn host_matches(pattern: &str, name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    match pattern.strip_prefix("*.") {
        Some(suffix) => name.len() > suffix.len() + 1 && name.ends_with(&format!(".{suffix}")),
        None => pattern == name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_rules_parse() {
        let r = |s: &str| parse_cidr_rule(s).map(|(n, p)| (n.to_string(), p));
        assert_eq!(r("10.0.0.0/8"), Ok(("10.0.0.0/8".into(), None)));
        assert_eq!(r("10.1.2.3"), Ok(("10.1.2.3/32".into(), None)));
        assert_eq!(r("10.1.2.3:8080"), Ok(("10.1.2.3/32".into(), Some(8080))));
        assert_eq!(r("10.0.0.0/8:443"), Ok(("10.0.0.0/8".into(), Some(443))));
        assert_eq!(r("2001:db8::1"), Ok(("2001:db8::1/128".into(), None)));
        assert_eq!(
            r("[2001:db8::1]:443"),
            Ok(("2001:db8::1/128".into(), Some(443)))
        );
        assert_eq!(
            r("2001:db8::/32:443"),
            Ok(("2001:db8::/32".into(), Some(443)))
        );
        assert_eq!(
            r("[2001:db8::]/32:443"),
            Ok(("2001:db8::/32".into(), Some(443)))
        );
        for bad in [
            "10.0.0.0/33",
            "10.1.2.3:0",
            "10.1.2.3:http",
            "example.com",
            "[::1",
            "",
        ] {
            assert!(r(bad).is_err(), "{bad}");
        }
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().expect("test address")
    }

    fn cidr(s: &str, port: Option<u16>) -> (IpNet, Option<u16>) {
        (s.parse().expect("test cidr"), port)
    }

    #[test]
    fn tables_parse() {
        for (n, _) in SENSITIVE {
            assert!(n.parse::<IpNet>().is_ok(), "{n}");
        }
        for n in INTERNAL {
            assert!(n.parse::<IpNet>().is_ok(), "{n}");
        }
    }

    #[test]
    fn ipnet_parse_and_contains() {
        let n: IpNet = "10.1.2.3/8".parse().expect("parse");
        assert_eq!(n.to_string(), "10.0.0.0/8");
        assert!(n.contains("10.200.0.1".parse().expect("ip")));
        assert!(!n.contains("11.0.0.1".parse().expect("ip")));
        // IPv4-mapped IPv6 is the IPv4 address.
        assert!(n.contains("::ffff:10.0.0.1".parse().expect("ip")));
        assert!("10.0.0.0/33".parse::<IpNet>().is_err());
        assert!("nonsense/8".parse::<IpNet>().is_err());
        let all: IpNet = "0.0.0.0/0".parse().expect("parse");
        assert!(all.contains("1.2.3.4".parse().expect("ip")));
        assert!(!all.contains("::1".parse().expect("ip")));
        let v6: IpNet = "2001:db8::/32".parse().expect("parse");
        assert!(v6.contains("2001:db8:1::5".parse().expect("ip")));
    }

    #[test]
    fn default_denies_everything() {
        let p = Policy::deny_all();
        assert_eq!(
            p.check(sa("93.184.216.34:443"), None),
            Decision::Deny(DenyReason::NoRule)
        );
        assert_eq!(
            p.check(sa("[2001:db8::1]:80"), None).errno(),
            Some(Errno::ECONNREFUSED)
        );
    }

    #[test]
    fn cidr_with_port() {
        let p = Policy::new(
            vec![
                cidr("93.184.216.0/24", Some(443)),
                cidr("2001:db8::/32", None),
            ],
            vec![],
        );
        assert!(p.check(sa("93.184.216.34:443"), None).is_allowed());
        assert!(!p.check(sa("93.184.216.34:80"), None).is_allowed());
        assert!(!p.check(sa("93.184.217.1:443"), None).is_allowed());
        assert!(p.check(sa("[2001:db8::7]:22"), None).is_allowed());
        // The same IPv4 destination spelled as IPv4-mapped IPv6.
        assert!(p.check(sa("[::ffff:93.184.216.34]:443"), None).is_allowed());
    }

    #[test]
    fn wildcard_host() {
        let p = Policy::new(vec![], vec!["*.Example.com.".into(), "api.test".into()]);
        assert!(p.host_allowed("a.example.com"));
        assert!(p.host_allowed("A.B.EXAMPLE.COM."));
        assert!(!p.host_allowed("example.com"));
        assert!(!p.host_allowed("badexample.com"));
        assert!(p.host_allowed("api.test"));
        assert!(!p.host_allowed("x.api.test"));

        let ip: IpAddr = "93.184.216.34".parse().expect("ip");
        // Nothing recorded yet: denied.
        assert!(!p.check(SocketAddr::new(ip, 443), None).is_allowed());
        p.note_resolution("www.example.com", &[ip]);
        assert_eq!(
            p.check(SocketAddr::new(ip, 443), None),
            Decision::Allow {
                rule: "host www.example.com".into(),
                by_name: true,
            }
        );
        // A name the caller resolved itself.
        assert!(p
            .check(sa("1.2.3.4:80"), Some("cdn.example.com"))
            .is_allowed());
        assert!(!p.check(sa("1.2.3.4:80"), Some("evil.com")).is_allowed());
        // Names no rule matches are not recorded.
        p.note_resolution("evil.com", &["5.6.7.8".parse().expect("ip")]);
        assert!(!p.check(sa("5.6.7.8:80"), None).is_allowed());
    }

    #[test]
    fn link_local_and_metadata_denied() {
        let p = Policy::new(vec![cidr("0.0.0.0/0", None), cidr("::/0", None)], vec![]);
        assert!(p.check(sa("8.8.8.8:53"), None).is_allowed());
        for d in [
            "169.254.169.254:80",
            "127.0.0.1:22",
            "[fe80::1]:80",
            "[::1]:22",
            "[fd00:ec2::254]:80",
            "[::ffff:169.254.169.254]:80",
        ] {
            assert!(
                matches!(
                    p.check(sa(d), None),
                    Decision::Deny(DenyReason::Sensitive(_))
                ),
                "{d}"
            );
        }
        // Named explicitly: allowed.
        let p = Policy::new(vec![cidr("169.254.169.254/32", Some(80))], vec![]);
        assert!(p.check(sa("169.254.169.254:80"), None).is_allowed());
        assert!(!p.check(sa("169.254.169.253:80"), None).is_allowed());
    }

    #[test]
    fn host_addresses_need_a_rule_that_names_them() {
        let host: IpAddr = "192.0.2.10".parse().expect("ip");
        let host6: IpAddr = "2001:db8::10".parse().expect("ip");
        let wide = Policy::new(
            vec![cidr("0.0.0.0/0", None), cidr("2001:db8::/32", None)],
            vec!["*.example.com".into()],
        )
        .with_host_addresses([host, host6]);
        for d in [
            "192.0.2.10:22",
            "[::ffff:192.0.2.10]:22",
            "[2001:db8::10]:22",
        ] {
            assert_eq!(
                wide.check(sa(d), None),
                Decision::Deny(DenyReason::Sensitive("the host's own")),
                "{d}"
            );
        }
        // Its neighbours are not the host.
        assert!(wide.check(sa("192.0.2.11:22"), None).is_allowed());
        // A name that resolves to the host is rebinding.
        wide.note_resolution("a.example.com", &[host]);
        assert!(matches!(
            wide.check(sa("192.0.2.10:80"), None),
            Decision::Deny(DenyReason::Rebinding { .. })
        ));
        // Named exactly: allowed (on the rule's port only).
        let named =
            Policy::new(vec![cidr("192.0.2.10/32", Some(80))], vec![]).with_host_addresses([host]);
        assert!(named.check(sa("192.0.2.10:80"), None).is_allowed());
        assert!(!named.check(sa("192.0.2.10:22"), None).is_allowed());
    }

    #[test]
    fn rebinding_denied() {
        let p = Policy::new(vec![], vec!["*.example.com".into()]);
        let evil: Vec<IpAddr> = ["169.254.169.254", "127.0.0.1", "10.0.0.5", "fd12::1"]
            .iter()
            .map(|s| s.parse().expect("ip"))
            .collect();
        p.note_resolution("a.example.com", &evil);
        for ip in evil {
            assert!(
                matches!(
                    p.check(SocketAddr::new(ip, 80), None),
                    Decision::Deny(DenyReason::Rebinding { .. })
                ),
                "{ip}"
            );
        }
        // An internal network opened by CIDR stays reachable.
        let p = Policy::new(vec![cidr("10.0.0.0/8", None)], vec!["*.example.com".into()]);
        p.note_resolution("a.example.com", &["10.0.0.5".parse().expect("ip")]);
        assert!(p.check(sa("10.0.0.5:80"), None).is_allowed());
    }

    #[test]
    fn resolutions_are_bounded() {
        let p = Policy::new(vec![], vec!["*.example.com".into()]);
        for i in 0..(MAX_RESOLUTIONS as u32 + 10) {
            let ip = IpAddr::V4(Ipv4Addr::from(0x0101_0000 + i));
            p.note_resolution("a.example.com", &[ip]);
        }
        let r = p.resolutions.lock().expect("lock");
        assert_eq!(r.order.len(), MAX_RESOLUTIONS);
        assert_eq!(r.by_addr.len(), MAX_RESOLUTIONS);
        // The oldest went first.
        assert!(!r
            .by_addr
            .contains_key(&IpAddr::V4(Ipv4Addr::from(0x0101_0000))));
    }

    #[test]
    fn names_must_be_allowed_and_resolved_to_the_address() {
        let p = Policy::new(vec![], vec!["api.test".into(), "ssh.test:22/tcp".into()]);
        let api: IpAddr = "93.184.216.34".parse().expect("ip");
        let other: IpAddr = "93.184.216.35".parse().expect("ip");
        p.note_resolution("api.test", &[api]);
        p.note_resolution("ssh.test", &[other]);
        // By name: HTTP and TLS on any port must then name the host.
        assert_eq!(
            p.check(SocketAddr::new(api, 8443), None),
            Decision::Allow {
                rule: "host api.test".into(),
                by_name: true
            }
        );
        assert!(p
            .check_name(SocketAddr::new(api, 443), Some("API.test."))
            .is_allowed());
        for name in [Some("evil.test"), Some("ssh.test"), None] {
            assert!(
                !p.check_name(SocketAddr::new(api, 443), name).is_allowed(),
                "{name:?}"
            );
        }
        // NAME:PORT/tcp: that port, any protocol, nothing else.
        assert_eq!(
            p.check(SocketAddr::new(other, 22), None),
            Decision::Allow {
                rule: "host ssh.test port 22/tcp".into(),
                by_name: false
            }
        );
        assert!(!p.check(SocketAddr::new(other, 443), None).is_allowed());
        assert!(HostRule::parse("a.test:22").is_err());
        assert!(HostRule::parse("a.test:0/tcp").is_err());
        assert!(HostRule::parse("a.test:22/udp").is_err());
    }

    #[test]
    fn updates_take_effect_for_the_next_check() {
        let p = Policy::new(vec![], vec![]);
        let ip: IpAddr = "93.184.216.34".parse().expect("ip");
        assert!(!p.host_allowed("api.test"));
        p.update(vec![HostRule::parse("api.test").expect("rule")], vec![]);
        p.note_resolution("api.test", &[ip]);
        assert!(p
            .check_name(SocketAddr::new(ip, 443), Some("api.test"))
            .is_allowed());
        p.update(vec![], vec!["api.test".into()]);
        assert!(!p.host_allowed("api.test"));
        assert_eq!(
            p.check_name(SocketAddr::new(ip, 443), Some("api.test")),
            Decision::Deny(DenyReason::Denied {
                name: "api.test".into()
            })
        );
        p.update(vec![HostRule::parse("api.test").expect("rule")], vec![]);
        assert!(p.host_allowed("api.test"));
    }

    #[test]
    fn http_rules_parse_and_match() {
        let r = HttpRule::parse("api.test:get,HEAD:/v1/,/health").expect("rule");
        assert_eq!(r.methods, vec!["GET", "HEAD"]);
        assert!(r.allows("GET", "/v1/x"));
        assert!(r.allows("HEAD", "http://api.test/health"));
        assert!(!r.allows("POST", "/v1/x"));
        assert!(!r.allows("GET", "/v2"));
        for bad in [
            "",
            ":GET",
            "api.test",
            "api.test:",
            "api.test:G3T",
            "api.test:GET:v1",
        ] {
            assert!(HttpRule::parse(bad).is_err(), "{bad}");
        }
        let s = Secret::new(
            "T".into(),
            "P".into(),
            b"hunter2".to_vec(),
            vec!["*.api.test".into()],
        );
        assert!(s.goes_to("x.api.test") && !s.goes_to("api.test"));
        // Debug output never shows the value.
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
