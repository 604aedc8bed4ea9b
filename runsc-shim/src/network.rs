//! The guest's network as a user asks for it: `--network none|sandbox|host`
//! with the allow rules (`--allow-cidr`, `--allow-host`) of `do` and of the
//! OCI runtime's global flags, or the same keys in the containerd shim's
//! runtime config file. One set of checks and one meaning for all three
//! (ARCHITECTURE.md, "Networking"):
//!
//! * `none`: loopback only, inside the netstack; the default without rules.
//! * `sandbox`: the netstack plus a way out for what the rules allow
//!   (relays through host sockets the Sentry opens, DNS through the
//!   Sentry); every other destination is refused at once. The default when
//!   rules are given. Without rules it is default deny made visible: the
//!   guest's connections out are refused (`ECONNREFUSED`) and logged, and
//!   its DNS answers `NXDOMAIN`, rather than `none`'s silent
//!   `ENETUNREACH`.
//! * `host`: TCP and UDP as host sockets, no egress policy (explicitly
//!   weaker); rules do not apply to it.

/// How the command line or the config file names things, for messages
/// that point at what the user wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spelling {
    /// `--network`, `--allow-cidr`, `--allow-host`
    Flags,
    /// the containerd shim's runtime config: `network`, `allow_cidr`,
    /// `allow_host`
    ConfigFile,
}

impl Spelling {
    fn allow_cidr(self) -> &'static str {
        match self {
            Spelling::Flags => "--allow-cidr",
            Spelling::ConfigFile => "allow_cidr",
        }
    }

    fn allow_host(self) -> &'static str {
        match self {
            Spelling::Flags => "--allow-host",
            Spelling::ConfigFile => "allow_host",
        }
    }

    fn network(self, mode: Mode) -> String {
        match self {
            Spelling::Flags => format!("--network {}", mode.as_str()),
            Spelling::ConfigFile => format!("network = \"{}\"", mode.as_str()),
        }
    }
}

/// Why a network choice is refused: one line naming the flag or key at
/// fault, in the user's [`Spelling`].
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// allow rules with `none`
    #[error(
        "{} and {} need {} (with {} nothing leaves the sandbox)",
        .0.allow_cidr(),
        .0.allow_host(),
        .0.network(Mode::Sandbox),
        .0.network(Mode::None)
    )]
    RulesNeedSandbox(Spelling),
    /// allow rules with `host`
    #[error(
        "{} and {} do not apply to {}, which has no egress policy (use {} for rules)",
        .0.allow_cidr(),
        .0.allow_host(),
        .0.network(Mode::Host),
        .0.network(Mode::Sandbox)
    )]
    RulesWithHost(Spelling),
    /// a CIDR rule that does not parse
    #[error("{} {reason}", .spelling.allow_cidr())]
    BadCidr {
        /// how the user named the rule
        spelling: Spelling,
        /// the netstack's reason, naming the rule
        reason: String,
    },
    /// a CIDR rule for the sandbox's own loopback
    #[error(
        "{} {rule:?}: that is the sandbox's own loopback (127.0.0.0/8, ::1), \
         which no rule opens: the host's loopback is never reachable from the sandbox",
        .spelling.allow_cidr()
    )]
    Loopback {
        /// how the user named the rule
        spelling: Spelling,
        /// the rule
        rule: String,
    },
    /// a host rule whose port part does not parse
    #[error("{} {reason}", .spelling.allow_host())]
    BadHost {
        /// how the user named the rule
        spelling: Spelling,
        /// the netstack's reason, naming the rule
        reason: String,
    },
    /// a host rule that is no domain name
    #[error(
        "{} {rule:?}: not a domain name (give example.com, *.example.com or example.com:22/tcp)",
        .spelling.allow_host()
    )]
    NotADomain {
        /// how the user named the rule
        spelling: Spelling,
        /// the rule
        rule: String,
    },
    /// `--allow-http`, `--secret` or `--egress-log` without `sandbox`
    #[error(
        "--allow-http, --secret and --egress-log need --network sandbox \
         (the Sentry's relays carry what leaves)"
    )]
    ExtrasNeedSandbox,
    /// an `--allow-http` rule that does not parse (the netstack's reason,
    /// naming the rule)
    #[error("--allow-http {0}")]
    BadHttp(String),
    /// an `--allow-http` rule whose host part is no domain name
    #[error("--allow-http {0:?}: not a domain name before ':'")]
    HttpNotADomain(String),
    /// a `--secret` that does not parse
    #[error(
        "--secret {spec:?}: {what} \
         (give NAME=@FILE:HOST[,HOST...] or NAME=env:VAR:HOST[,HOST...])"
    )]
    BadSecret {
        /// the flag's value
        spec: String,
        /// what is wrong with it
        what: &'static str,
    },
    /// two `--secret`s of one name
    #[error("--secret {0}: given twice")]
    SecretTwice(String),
}

/// Why [`Extras::apply`] cannot put the rules in place: one line naming
/// the flag or file at fault.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// a rule refused (as [`Network::with_extras`] refuses it)
    #[error(transparent)]
    Rules(#[from] Error),
    /// the `--egress-log` file cannot be opened
    #[error("--egress-log {}: {source}", path.display())]
    EgressLog {
        /// the file
        path: std::path::PathBuf,
        /// the host's answer
        source: std::io::Error,
    },
    /// a secret's file cannot be read
    #[error("--secret {name}: cannot read {}: {source}", path.display())]
    ReadSecret {
        /// the secret's name
        name: String,
        /// its file
        path: std::path::PathBuf,
        /// the host's answer
        source: std::io::Error,
    },
    /// a secret's variable is not in this process's environment
    #[error("--secret {name}: the variable {var} is not set")]
    SecretUnset {
        /// the secret's name
        name: String,
        /// its variable
        var: String,
    },
    /// a secret whose value is empty
    #[error("--secret {0}: the value is empty")]
    EmptySecret(String),
    /// no random bytes for a secret's placeholder
    #[error("getrandom: {0}")]
    Random(#[source] std::io::Error),
    /// the netstack's policy is shared already and cannot take the rules
    #[error("internal error: the egress policy is already in use")]
    PolicyInUse,
    /// the host's trust store cannot be read
    #[error("the host's trust store {}: {source} (set SSL_CERT_FILE)", path.display())]
    ReadTrustStore {
        /// the file
        path: std::path::PathBuf,
        /// the host's answer
        source: std::io::Error,
    },
    /// the host's trust store holds no certificate the interceptor takes
    #[error("{}: {reason}", path.display())]
    BadTrustStore {
        /// the file
        path: std::path::PathBuf,
        /// the interceptor's reason
        reason: String,
    },
}

/// The network mode, without its rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// loopback only
    None,
    /// a link out for what the allow rules allow
    Sandbox,
    /// host sockets, no policy
    Host,
}

impl Mode {
    /// The spelling of the mode on the command line and in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::None => "none",
            Mode::Sandbox => "sandbox",
            Mode::Host => "host",
        }
    }

    /// The mode a word names (`none`, `sandbox` or `host`).
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "none" => Some(Mode::None),
            "sandbox" => Some(Mode::Sandbox),
            "host" => Some(Mode::Host),
            _ => None,
        }
    }
}

/// Allow rules, as given (and checked by [`Network::new`]): kept as text
/// so that `create` can hand them to the boot process on its command line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EgressRules {
    /// `CIDR[:PORT]` rules
    pub allow_cidr: Vec<String>,
    /// `DOMAIN` or `*.DOMAIN` rules
    pub allow_host: Vec<String>,
    /// `--allow-http`, `--secret`, `--egress-log`
    pub extras: Extras,
}

/// A checked network choice.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Network {
    /// loopback only (the default)
    #[default]
    None,
    /// the egress policy of these rules (none: everything refused)
    Sandbox(EgressRules),
    /// host sockets, no egress policy
    Host,
}

impl Network {
    /// Checks a mode (`None`: not given) and rules together; the error is
    /// one line naming the flag or key at fault, in `spelling`.
    pub fn new(
        mode: Option<Mode>,
        allow_cidr: Vec<String>,
        allow_host: Vec<String>,
        spelling: Spelling,
    ) -> Result<Network, Error> {
        let has_rules = !allow_cidr.is_empty() || !allow_host.is_empty();
        let mode = mode.unwrap_or(if has_rules { Mode::Sandbox } else { Mode::None });
        match mode {
            Mode::None if has_rules => return Err(Error::RulesNeedSandbox(spelling)),
            Mode::None => return Ok(Network::None),
            Mode::Host if has_rules => return Err(Error::RulesWithHost(spelling)),
            Mode::Host => return Ok(Network::Host),
            Mode::Sandbox => {}
        }
        for c in &allow_cidr {
            let (net, _) = netstack::policy::parse_cidr_rule(c)
                .map_err(|reason| Error::BadCidr { spelling, reason })?;
            if within_loopback(&net) {
                return Err(Error::Loopback {
                    spelling,
                    rule: c.clone(),
                });
            }
        }
        for h in &allow_host {
            let name = h.split_once(':').map_or(h.as_str(), |(n, _)| n);
            if !is_domain_rule(name) {
                return Err(Error::NotADomain {
                    spelling,
                    rule: h.clone(),
                });
            }
            netstack::policy::HostRule::parse(h)
                .map_err(|reason| Error::BadHost { spelling, reason })?;
        }
        Ok(Network::Sandbox(EgressRules {
            allow_cidr,
            allow_host,
            extras: Extras::default(),
        }))
    }

    /// The network with `extras` (checked: they need `sandbox`).
    pub fn with_extras(self, extras: Extras) -> Result<Network, Error> {
        extras.check_syntax()?;
        extras.check(&self)?;
        Ok(match self {
            Network::Sandbox(mut r) => {
                r.extras = extras;
                Network::Sandbox(r)
            }
            other => other,
        })
    }

    /// Whether the guest's TCP and UDP are host sockets.
    pub fn is_host(&self) -> bool {
        matches!(self, Network::Host)
    }

    /// The rules of `sandbox`, `None` for the other modes.
    pub fn egress(&self) -> Option<&EgressRules> {
        match self {
            Network::Sandbox(r) => Some(r),
            _ => None,
        }
    }

    /// Whether the Sentry opens host sockets for the guest: its own
    /// (`host`) or the relays of `sandbox`. The Sentry then stays in the
    /// network namespace they belong in.
    pub fn host_sockets(&self) -> bool {
        !matches!(self, Network::None)
    }

    /// The flags that give this network on a command line (the OCI
    /// runtime's global flags, for the boot process).
    pub fn to_args(&self) -> Vec<String> {
        match self {
            Network::None => Vec::new(),
            Network::Host => vec!["--network".into(), "host".into()],
            Network::Sandbox(r) => {
                let mut v = vec!["--network".to_string(), "sandbox".to_string()];
                for c in &r.allow_cidr {
                    v.push(format!("--allow-cidr={c}"));
                }
                for h in &r.allow_host {
                    v.push(format!("--allow-host={h}"));
                }
                for h in &r.extras.allow_http {
                    v.push(format!("--allow-http={h}"));
                }
                // Where each value is, never the value.
                for s in &r.extras.secrets {
                    v.push(format!("--secret={s}"));
                }
                if let Some(f) = &r.extras.egress_log {
                    v.push(format!("--egress-log={}", f.display()));
                }
                v
            }
        }
    }

    /// The netstack's configuration. `host_addresses` are the host's own
    /// addresses, closed unless a rule names them (a wide rule such as
    /// `0.0.0.0/0` opens the network, not the host's services).
    /// `report_refusals` prints a line on the Sentry's standard error for
    /// every refused destination besides the log's.
    pub fn stack_config(
        &self,
        host_addresses: Vec<std::net::IpAddr>,
        report_refusals: bool,
    ) -> netstack::StackConfig {
        let Network::Sandbox(rules) = self else {
            // `host`: the netstack stays loopback-only and unused for
            // Internet sockets, every one being a host socket.
            return netstack::StackConfig::default();
        };
        let cidrs = rules
            .allow_cidr
            .iter()
            // Checked by `new`.
            .filter_map(|c| netstack::policy::parse_cidr_rule(c).ok())
            .collect();
        netstack::StackConfig {
            mode: netstack::Mode::Egress,
            policy: std::sync::Arc::new(
                netstack::Policy::new(cidrs, rules.allow_host.clone())
                    .with_host_addresses(host_addresses),
            ),
            report_refusals,
            ..Default::default()
        }
    }
}

/// What `--allow-http`, `--secret` and `--egress-log` add to a `sandbox`
/// network (checked by [`Extras::check`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Extras {
    /// `HOST:METHOD,...[:/PATH,...]`
    pub allow_http: Vec<String>,
    /// `NAME=@FILE:HOST,...` or `NAME=env:VAR:HOST,...`
    pub secrets: Vec<String>,
    /// JSON lines, one per attempt to leave the sandbox.
    pub egress_log: Option<std::path::PathBuf>,
}

/// A `--secret` as given: where its value is, and where it may go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretSpec {
    pub name: String,
    pub source: SecretSource,
    pub hosts: Vec<String>,
    /// `:body`: put in place in request bodies too.
    pub in_body: bool,
}

/// Where a secret's value is read from (never the command line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretSource {
    File(std::path::PathBuf),
    Env(String),
}

impl SecretSpec {
    /// Parses `NAME=@FILE:HOST[,HOST...][:body]` or
    /// `NAME=env:VAR:HOST[,HOST...][:body]`.
    pub fn parse(s: &str) -> Result<SecretSpec, Error> {
        let bad = |what| Error::BadSecret {
            spec: s.to_owned(),
            what,
        };
        let (name, rest) = s.split_once('=').ok_or_else(|| bad("no '='"))?;
        let (rest, in_body) = match rest.strip_suffix(":body") {
            Some(r) => (r, true),
            None => (rest, false),
        };
        if !is_env_name(name) {
            return Err(bad("NAME must be an environment variable's name"));
        }
        let (source, hosts) = rest
            .rsplit_once(':')
            .ok_or_else(|| bad("no ':' before the hosts"))?;
        let source = if let Some(f) = source.strip_prefix('@') {
            if f.is_empty() {
                return Err(bad("no file after '@'"));
            }
            SecretSource::File(f.into())
        } else if let Some(v) = source.strip_prefix("env:") {
            if !is_env_name(v) {
                return Err(bad("env: takes a variable's name"));
            }
            SecretSource::Env(v.to_string())
        } else {
            return Err(bad(
                "the value comes from @FILE or env:VAR, never the command line",
            ));
        };
        let hosts: Vec<String> = hosts.split(',').map(str::to_string).collect();
        if hosts.iter().any(|h| !is_domain_rule(h)) {
            return Err(bad(
                "each host is a domain name (example.com or *.example.com)",
            ));
        }
        Ok(SecretSpec {
            name: name.to_string(),
            source,
            hosts,
            in_body,
        })
    }

    /// Reads the value: a file's contents less one final newline, or a
    /// variable of this process's environment.
    pub fn value(&self) -> Result<Vec<u8>, ApplyError> {
        let v = match &self.source {
            SecretSource::File(f) => {
                let mut v = std::fs::read(f).map_err(|source| ApplyError::ReadSecret {
                    name: self.name.clone(),
                    path: f.clone(),
                    source,
                })?;
                if v.last() == Some(&b'\n') {
                    v.pop();
                    if v.last() == Some(&b'\r') {
                        v.pop();
                    }
                }
                v
            }
            SecretSource::Env(var) => std::env::var_os(var)
                .map(std::os::unix::ffi::OsStringExt::into_vec)
                .ok_or_else(|| ApplyError::SecretUnset {
                    name: self.name.clone(),
                    var: var.clone(),
                })?,
        };
        if v.is_empty() {
            return Err(ApplyError::EmptySecret(self.name.clone()));
        }
        Ok(v)
    }
}

fn is_env_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

impl Extras {
    /// Whether any of them is given.
    pub fn given(&self) -> bool {
        !self.allow_http.is_empty() || !self.secrets.is_empty() || self.egress_log.is_some()
    }

    /// Checks that they come with a `sandbox` network.
    pub fn check(&self, network: &Network) -> Result<(), Error> {
        if self.given() && network.egress().is_none() {
            return Err(Error::ExtrasNeedSandbox);
        }
        Ok(())
    }

    /// Checks the rules' syntax (values are read later, by
    /// [`Extras::apply`]).
    pub fn check_syntax(&self) -> Result<(), Error> {
        for h in &self.allow_http {
            let r = netstack::policy::HttpRule::parse(h).map_err(Error::BadHttp)?;
            if !is_domain_rule(&r.pattern) {
                return Err(Error::HttpNotADomain(h.clone()));
            }
        }
        let mut names = Vec::new();
        for s in &self.secrets {
            let spec = SecretSpec::parse(s)?;
            if names.contains(&spec.name) {
                return Err(Error::SecretTwice(spec.name));
            }
            names.push(spec.name);
        }
        Ok(())
    }

    /// Puts the rules into `config` (built by [`Network::stack_config`]):
    /// reads the secrets, makes the sandbox's CA when a host needs
    /// interception (adding it to what the guest's root `root` trusts
    /// already, [`guest_trust`], read only then), opens the egress log.
    /// Returns what the guest's environment gets (placeholders and the
    /// trust store's variables) and the variables it must not see (the
    /// secrets' sources).
    pub fn apply(
        &self,
        config: &mut netstack::StackConfig,
        root: &std::path::Path,
    ) -> Result<GuestEnv, ApplyError> {
        let mut env = GuestEnv::default();
        if let Some(path) = &self.egress_log {
            use std::os::unix::fs::OpenOptionsExt;
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(path)
                .map_err(|source| ApplyError::EgressLog {
                    path: path.clone(),
                    source,
                })?;
            config.audit = Some(std::sync::Arc::new(netstack::audit::AuditLog::new(
                Box::new(f),
            )));
        }
        if self.allow_http.is_empty() && self.secrets.is_empty() {
            return Ok(env);
        }
        let mut secrets = Vec::new();
        for s in &self.secrets {
            let spec = SecretSpec::parse(s)?;
            let value = spec.value()?;
            let placeholder = placeholder()?;
            env.set.push((spec.name.clone(), placeholder.clone()));
            if let SecretSource::Env(var) = &spec.source {
                env.remove.push(var.clone());
            }
            let in_body = spec.in_body;
            let secret = netstack::policy::Secret::new(spec.name, placeholder, value, spec.hosts);
            secrets.push(if in_body { secret.in_bodies() } else { secret });
        }
        let http = self
            .allow_http
            .iter()
            .filter_map(|h| netstack::policy::HttpRule::parse(h).ok())
            .collect();
        let policy = std::sync::Arc::get_mut(&mut config.policy).ok_or(ApplyError::PolicyInUse)?;
        policy.set_http_rules(http);
        policy.set_secrets(secrets);
        // Real hosts are verified against the trust store this process
        // uses (OpenSSL's variable, else Debian's bundle).
        let roots_path = std::env::var_os("SSL_CERT_FILE")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| TRUST_STORE.into());
        let roots = std::fs::read(&roots_path).map_err(|source| ApplyError::ReadTrustStore {
            path: roots_path.clone(),
            source,
        })?;
        let trust = guest_trust(root);
        let tls = netstack::tls::Interceptor::new(&roots)
            .map_err(|reason| ApplyError::BadTrustStore {
                path: roots_path.clone(),
                reason,
            })?
            .with_guest_trust(&trust.pem)
            .with_java_stores(trust.java);
        for var in TRUST_VARIABLES {
            env.set.push((var.to_string(), TRUST_STORE.to_string()));
        }
        config.tls = Some(std::sync::Arc::new(tls));
        Ok(env)
    }
}

/// The system trust store on Debian and its kin, in the guest and here.
pub const TRUST_STORE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Variables that point programs at a trust store: OpenSSL's, Python
/// requests', curl's, Node's (added to its own) and git's.
const TRUST_VARIABLES: &[&str] = &[
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
];

/// Where Java keeps its trust store: Debian's and Alpine's, Fedora's, and
/// a JDK's own (`lib/security/cacerts` below `/usr/lib/jvm/*` or the
/// official images' `/opt/java/openjdk`); most of the last are links to
/// the first.
const JAVA_STORES: &[&str] = &[
    "/etc/ssl/certs/java/cacerts",
    "/etc/pki/ca-trust/extracted/java/cacerts",
    "/opt/java/openjdk/lib/security/cacerts",
];

/// The most Java trust stores the sandbox's CA is added to.
const MAX_JAVA_STORES: usize = 16;

/// The trust stores the guest's root holds, which the sandbox's CA is
/// added to when it intercepts.
#[derive(Debug, Default)]
struct GuestTrust {
    /// the PEM store at [`TRUST_STORE`]
    pem: Vec<u8>,
    /// Java's stores: the path in the guest (no links in it) and contents
    java: Vec<(String, Vec<u8>)>,
}

/// The trust stores of the guest's root `root` (a host directory), read
/// without leaving it: links are followed as the guest would follow them,
/// and a file that is not a plain file of at most 16 MiB counts as none.
fn guest_trust(root: &std::path::Path) -> GuestTrust {
    let read = |guest: &str| {
        let real = in_root(root, guest)?;
        let host = root.join(real.trim_start_matches('/'));
        let meta = std::fs::symlink_metadata(&host).ok()?;
        if !meta.is_file() || meta.len() > 16 << 20 {
            return None;
        }
        Some((real, std::fs::read(&host).ok()?))
    };
    let mut java: Vec<(String, Vec<u8>)> = Vec::new();
    // (the folder as the guest finds it, and only so many: an image could
    // hold any number of them)
    let jdks: Vec<String> = in_root(root, "/usr/lib/jvm")
        .and_then(|jvm| std::fs::read_dir(root.join(jvm.trim_start_matches('/'))).ok())
        .into_iter()
        .flatten()
        .flatten()
        .take(MAX_JAVA_STORES)
        .filter_map(|e| Some(format!("/usr/lib/jvm/{}", e.file_name().to_str()?)))
        .collect();
    let candidates = JAVA_STORES
        .iter()
        .map(|p| p.to_string())
        .chain(jdks.into_iter().flat_map(|jdk| {
            [
                format!("{jdk}/lib/security/cacerts"),
                format!("{jdk}/jre/lib/security/cacerts"),
            ]
        }));
    for path in candidates {
        if java.len() == MAX_JAVA_STORES {
            break;
        }
        if let Some((real, bytes)) = read(&path) {
            if !java.iter().any(|(p, _)| *p == real) {
                java.push((real, bytes));
            }
        }
    }
    GuestTrust {
        pem: read(TRUST_STORE).map(|(_, b)| b).unwrap_or_default(),
        java,
    }
}

/// `path` (absolute, in the guest) with every link in it resolved as the
/// guest sees its root `root`: an absolute target starts again at `root`,
/// and `..` stops there. `None` if a part is missing or links go round.
fn in_root(root: &std::path::Path, path: &str) -> Option<String> {
    let mut todo: Vec<String> = path.split('/').rev().map(str::to_owned).collect();
    let mut done: Vec<String> = Vec::new();
    let mut links = 0;
    while let Some(part) = todo.pop() {
        match part.as_str() {
            "" | "." => continue,
            ".." => {
                done.pop();
                continue;
            }
            _ => {}
        }
        let host = root.join(done.join("/")).join(&part);
        let meta = std::fs::symlink_metadata(&host).ok()?;
        if !meta.file_type().is_symlink() {
            done.push(part);
            continue;
        }
        links += 1;
        if links > 40 {
            return None;
        }
        let target = std::fs::read_link(&host).ok()?;
        let target = target.to_str()?;
        if target.starts_with('/') {
            done.clear();
        }
        todo.extend(target.split('/').rev().map(str::to_owned));
    }
    Some(format!("/{}", done.join("/")))
}

/// What the guest's environment gets from [`Extras::apply`].
#[derive(Debug, Default)]
pub struct GuestEnv {
    /// Variables set (over any of the same name).
    pub set: Vec<(String, String)>,
    /// Variables removed.
    pub remove: Vec<String>,
}

impl GuestEnv {
    /// `env` (`NAME=VALUE` entries) as the guest should see it.
    pub fn edit(&self, env: &mut Vec<Vec<u8>>) {
        env.retain(|e| {
            let name = e.split(|&b| b == b'=').next().unwrap_or(e);
            !self
                .remove
                .iter()
                .chain(self.set.iter().map(|(n, _)| n))
                .any(|n| n.as_bytes() == name)
        });
        for (n, v) in &self.set {
            env.push(format!("{n}={v}").into_bytes());
        }
    }
}

/// A random placeholder, unlike any real token.
fn placeholder() -> Result<String, ApplyError> {
    let mut b = [0u8; 16];
    // SAFETY: getrandom writes at most b.len() bytes into b.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        return Err(ApplyError::Random(std::io::Error::last_os_error()));
    }
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Ok(format!("ferrovisor-secret-{hex}"))
}

/// Checks the rules of `update --allow-host` and `--deny-host`.
pub fn check_host_update(allow: &[String], deny: &[String]) -> Result<(), Error> {
    if !allow.is_empty() {
        Network::new(
            Some(Mode::Sandbox),
            Vec::new(),
            allow.to_vec(),
            Spelling::Flags,
        )?;
    }
    for d in deny {
        if !is_domain_rule(d) {
            return Err(Error::NotADomain {
                spelling: Spelling::Flags,
                rule: d.clone(),
            });
        }
    }
    Ok(())
}

/// Whether every address of `net` is loopback (127.0.0.0/8, `::1`, or
/// their IPv4-mapped forms): a rule for it could never match anything, as
/// the sandbox's own loopback answers there.
fn within_loopback(net: &netstack::policy::IpNet) -> bool {
    use netstack::policy::IpNet;
    use std::net::{Ipv4Addr, Ipv6Addr};
    [
        IpNet::new(Ipv4Addr::LOCALHOST.into(), 8),
        IpNet::new(Ipv6Addr::LOCALHOST.into(), 128),
        IpNet::new(Ipv4Addr::LOCALHOST.to_ipv6_mapped().into(), 104),
    ]
    .into_iter()
    .flatten()
    .any(|l| l.contains_net(net))
}

/// `example.com` or `*.example.com`: labels of letters, digits, `-` and
/// `_`, at most 63 bytes each and 253 in all.
fn is_domain_rule(h: &str) -> bool {
    let name = h.strip_prefix("*.").unwrap_or(h);
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guests_trust_stores_are_found_as_the_guest_resolves_links() {
        use std::os::unix::fs::symlink;
        let root = std::env::temp_dir().join(format!("ferrovisor-trust-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let mk = |p: &str| std::fs::create_dir_all(root.join(p)).expect("dir");
        mk("etc/ssl/certs/java");
        mk("usr/lib/jvm/jdk-a/lib/security");
        mk("usr/lib/jvm/jdk-b/lib/security");
        mk("usr/lib/jvm/jdk-c/lib/security");
        std::fs::write(root.join("etc/ssl/certs/ca-certificates.crt"), "pem").expect("pem");
        std::fs::write(root.join("etc/ssl/certs/java/cacerts"), "debian").expect("jks");
        // An absolute link means the guest's root, not the host's.
        symlink(
            "/etc/ssl/certs/java/cacerts",
            root.join("usr/lib/jvm/jdk-a/lib/security/cacerts"),
        )
        .expect("link");
        std::fs::write(root.join("usr/lib/jvm/jdk-b/lib/security/cacerts"), "own").expect("own");
        // `..` stops at the root; a link that leads nowhere is none.
        symlink(
            "../../../../../../../../../etc/passwd",
            root.join("usr/lib/jvm/jdk-c/lib/security/cacerts"),
        )
        .expect("link");
        symlink("jdk-b", root.join("usr/lib/jvm/default")).expect("link");
        let t = guest_trust(&root);
        assert_eq!(t.pem, b"pem");
        let mut java: Vec<(String, String)> = t
            .java
            .into_iter()
            .map(|(p, b)| (p, String::from_utf8_lossy(&b).into_owned()))
            .collect();
        java.sort();
        assert_eq!(
            java,
            vec![
                ("/etc/ssl/certs/java/cacerts".into(), "debian".into()),
                (
                    "/usr/lib/jvm/jdk-b/lib/security/cacerts".into(),
                    "own".into()
                ),
            ]
        );
        symlink("loop", root.join("loop")).expect("link");
        assert_eq!(in_root(&root, "/loop"), None);
        let _ = std::fs::remove_dir_all(&root);
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn rules_imply_sandbox_and_need_it() {
        assert_eq!(
            Network::new(None, vec![], vec![], Spelling::Flags),
            Ok(Network::None)
        );
        let n = Network::new(None, s(&["10.0.0.0/8:443"]), vec![], Spelling::Flags);
        assert_eq!(
            n,
            Ok(Network::Sandbox(EgressRules {
                allow_cidr: s(&["10.0.0.0/8:443"]),
                allow_host: vec![],
                extras: Default::default(),
            }))
        );
        // `sandbox` alone: everything refused, but a sandbox network.
        let n = Network::new(Some(Mode::Sandbox), vec![], vec![], Spelling::Flags);
        assert_eq!(n, Ok(Network::Sandbox(EgressRules::default())));
        let n = n.expect("sandbox");
        assert!(n.host_sockets() && !n.is_host());
        assert!(matches!(
            n.stack_config(vec![], false).mode,
            netstack::Mode::Egress
        ));
        assert!(!Network::None.host_sockets());
        assert!(Network::Host.host_sockets());
    }

    #[test]
    fn errors_name_the_flag_or_the_key() {
        /// mode, CIDR rules, host rules, spelling, what the error says
        type Case = (
            Option<Mode>,
            &'static [&'static str],
            &'static [&'static str],
            Spelling,
            &'static str,
        );
        let cases: &[Case] = &[
            (
                Some(Mode::Host),
                &["10.0.0.0/8"],
                &[],
                Spelling::Flags,
                "--allow-cidr and --allow-host do not apply to --network host",
            ),
            (
                Some(Mode::None),
                &[],
                &["example.com"],
                Spelling::Flags,
                "need --network sandbox (with --network none",
            ),
            (
                Some(Mode::None),
                &[],
                &["example.com"],
                Spelling::ConfigFile,
                "allow_cidr and allow_host need network = \"sandbox\"",
            ),
            (
                None,
                &["10.0.0.0/33"],
                &[],
                Spelling::Flags,
                "--allow-cidr \"10.0.0.0/33\"",
            ),
            (
                None,
                &["1.2.3.4:0"],
                &[],
                Spelling::ConfigFile,
                "allow_cidr \"1.2.3.4:0\": the port after the network",
            ),
            (
                None,
                &["127.0.0.2/32:80"],
                &[],
                Spelling::Flags,
                "--allow-cidr \"127.0.0.2/32:80\": that is the sandbox's own loopback",
            ),
            (
                None,
                &["[::1]:80"],
                &[],
                Spelling::ConfigFile,
                "allow_cidr \"[::1]:80\": that is the sandbox's own loopback",
            ),
            (
                None,
                &[],
                &["exa mple.com"],
                Spelling::Flags,
                "--allow-host \"exa mple.com\": not a domain name",
            ),
            (
                None,
                &[],
                &["*."],
                Spelling::ConfigFile,
                "allow_host \"*.\": not a domain name",
            ),
        ];
        for (mode, cidr, host, spelling, says) in cases {
            let e = Network::new(*mode, s(cidr), s(host), *spelling)
                .expect_err(says)
                .to_string();
            assert!(e.contains(says), "{says:?}: {e}");
            assert!(!e.contains('\n'), "{e:?}");
        }
        let whole = |mode, cidr: &[&str], host: &[&str], spelling| {
            Network::new(mode, s(cidr), s(host), spelling)
                .expect_err("refused")
                .to_string()
        };
        assert_eq!(
            whole(Some(Mode::None), &["10.0.0.0/8"], &[], Spelling::Flags),
            "--allow-cidr and --allow-host need --network sandbox \
             (with --network none nothing leaves the sandbox)"
        );
        assert_eq!(
            whole(Some(Mode::Host), &[], &["a.b"], Spelling::ConfigFile),
            "allow_cidr and allow_host do not apply to network = \"host\", which has no \
             egress policy (use network = \"sandbox\" for rules)"
        );
        assert_eq!(
            whole(None, &["127.0.0.1"], &[], Spelling::Flags),
            "--allow-cidr \"127.0.0.1\": that is the sandbox's own loopback (127.0.0.0/8, \
             ::1), which no rule opens: the host's loopback is never reachable from the sandbox"
        );
        assert!(Network::new(
            None,
            vec![],
            s(&["*.example.com", "a-b_c.d"]),
            Spelling::Flags
        )
        .is_ok());
    }

    #[test]
    fn arguments_round_trip() {
        let n = Network::Sandbox(EgressRules {
            allow_cidr: s(&["192.0.2.7:443", "[2001:db8::]/32:53"]),
            allow_host: s(&["*.example.com"]),
            extras: Default::default(),
        });
        assert_eq!(
            n.to_args(),
            s(&[
                "--network",
                "sandbox",
                "--allow-cidr=192.0.2.7:443",
                "--allow-cidr=[2001:db8::]/32:53",
                "--allow-host=*.example.com"
            ])
        );
        assert_eq!(Network::Host.to_args(), s(&["--network", "host"]));
        assert!(Network::None.to_args().is_empty());
    }
}
