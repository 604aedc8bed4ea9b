//! `--network sandbox` and the egress policy (issue 7, points 3 to 6).
//!
//! Each test runs in network and mount namespaces of its own (`unshare -m -n
//! --propagation private`), where ferrovisor runs. A second network
//! namespace, the "outside", is joined to it by a veth pair: Python servers
//! there listen on the test addresses and log every request they get.
//! `/etc/hosts` is bind-mounted so that the Sentry's DNS server (which asks
//! the host's resolver) has names to find. Nothing changes on the host.

mod common;

use std::time::Duration;

use common::{command, run, show, Outcome, TempDir};

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");
const TIMEOUT: Duration = Duration::from_secs(120);

/// A public-looking test address (TEST-NET-2) and an internal one, both
/// outside; and the address of ferrovisor's own side of the link: to the
/// sandbox, one of the host's own addresses.
const SERVER: &str = "198.51.100.7";
const INTERNAL: &str = "10.99.0.1";
const HOST_SIDE: &str = "198.51.100.1";
/// The outside's IPv6 address.
const SERVER6: &str = "2001:db8::7";

/// Runs `body` (shell) in private namespaces where `$SERVER` (public) and
/// `$INTERNAL` serve `$DIR/blob` over HTTP on port 8080 from the outside
/// namespace (run a command there with `outside CMD...`), and the host's
/// own `127.0.0.1` and `HOST_SIDE` do too (all log in `$DIR/server.log`);
/// `$DIR/hosts` is `/etc/hosts`, and `$FV` is the ferrovisor binary.
fn scenario(label: &str, hosts: &str, body: &str) -> Outcome {
    let dir = TempDir::new(label);
    std::fs::write(dir.path().join("hosts"), hosts).expect("hosts");
    let net = common::outside_namespace(
        &[
            &format!("{SERVER}/24"),
            &format!("{INTERNAL}/24"),
            &format!("{SERVER6}/64"),
        ],
        &[&format!("{HOST_SIDE}/24"), "10.99.0.2/24", "2001:db8::1/64"],
    );
    let script = format!(
        r#"set -e
# The outside: a network namespace held by a sleeping process.
{net}head -c 3000000 /dev/urandom > "$DIR/blob"
cd "$DIR"
nsenter -t $OUT -n python3 -m http.server --bind {SERVER} 8080 2>>"$DIR/server.log" >/dev/null &
PIDS="$PIDS $!"
nsenter -t $OUT -n python3 -m http.server --bind {INTERNAL} 8080 2>>"$DIR/server.log" >/dev/null &
PIDS="$PIDS $!"
python3 -m http.server --bind 127.0.0.1 8080 2>>"$DIR/server.log" >/dev/null &
PIDS="$PIDS $!"
python3 -m http.server --bind {HOST_SIDE} 8080 2>>"$DIR/server.log" >/dev/null &
PIDS="$PIDS $!"
for i in $(seq 100); do
  python3 -c "import socket; [socket.create_connection((a, 8080)).close() for a in ('{SERVER}', '{INTERNAL}', '127.0.0.1', '{HOST_SIDE}')]" 2>/dev/null && break
  sleep 0.1
done
: > "$DIR/server.log"
cd /
set +e
{body}
"#
    );
    common::in_namespaces(FERROVISOR, dir.path(), &script, TIMEOUT)
}

/// `n` fetches were refused with `ECONNREFUSED`, and the test servers
/// never saw a connection (`log: 0` is the size of their log).
fn assert_refused_unseen(o: &Outcome, n: usize) {
    assert_eq!(
        o.stdout.matches("error 111 ConnectionRefusedError").count(),
        n,
        "{}",
        show(o)
    );
    assert!(o.stdout.contains("log: 0"), "{}", show(o));
}

/// Python in the sandbox: fetch `url`, print the length and SHA-256, or the
/// error (`errno` for a refused connection).
const FETCH: &str = r#"
import hashlib, sys, urllib.request
try:
    d = urllib.request.urlopen(sys.argv[1], timeout=20).read()
    print("got", len(d), hashlib.sha256(d).hexdigest())
except Exception as e:
    r = getattr(e, "reason", e)
    print("error", getattr(r, "errno", None), type(r).__name__)
"#;

#[test]
fn allowed_cidr_downloads_intact() {
    let body = format!(
        r#"echo "want $(sha256sum "$DIR/blob" | cut -d' ' -f1)"
$FV do --allow-cidr {SERVER}/32:8080 -- python3 -I -c '{FETCH}' http://{SERVER}:8080/blob
echo "requests $(grep -c 'GET /blob' "$DIR/server.log")"
"#
    );
    let o = scenario("cidr", "127.0.0.1 localhost\n", &body);
    let want = o
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("want "))
        .unwrap_or_else(|| panic!("no checksum\n{}", show(&o)))
        .to_owned();
    assert!(
        o.stdout.contains(&format!("got 3000000 {want}")),
        "{}",
        show(&o)
    );
    assert!(o.stdout.contains("requests 1"), "{}", show(&o));
}

#[test]
fn missing_rule_is_refused_before_any_host_connection() {
    // A rule for another port, and none at all: both refused at once with
    // ECONNREFUSED, logged with the destination, and the server never sees
    // a connection.
    let body = format!(
        r#"$FV do --allow-cidr {SERVER}/32:9999 -- python3 -I -c '{FETCH}' http://{SERVER}:8080/blob
$FV do --network sandbox -- python3 -I -c '{FETCH}' http://{SERVER}:8080/blob
echo "log: $(wc -c < "$DIR/server.log")"
"#
    );
    let o = scenario("norule", "127.0.0.1 localhost\n", &body);
    assert_refused_unseen(&o, 2);
    assert_eq!(
        o.stderr
            .matches(&format!("egress to {SERVER}:8080 refused"))
            .count(),
        2,
        "{}",
        show(&o)
    );
}

#[test]
fn host_rules_hold_through_the_sentrys_dns() {
    let hosts = format!(
        "127.0.0.1 localhost\n{SERVER} files.example.test\n{SERVER} other.example.test\n\
         {INTERNAL} rebind.example.test\n"
    );
    let body = format!(
        r#"echo "want $(sha256sum "$DIR/blob" | cut -d' ' -f1)"
$FV do --allow-host files.example.test --allow-host '*.rebind.example.test' --allow-host rebind.example.test -- sh -c '
  python3 -I -c "{fetch}" http://files.example.test:8080/blob
  python3 -I -c "import socket
try: socket.getaddrinfo(\"other.example.test\", 80)
except socket.gaierror as e: print(\"other\", e.errno == socket.EAI_NONAME)"
  python3 -I -c "{fetch}" http://rebind.example.test:8080/blob
  python3 -I -c "{fetch}" http://{SERVER}:8080/blob
  grep -c nameserver /etc/resolv.conf
  python3 -I -c "import socket, struct
q = b\"\\x00\\x09\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x05files\\x07example\\x04test\\x00\\x00\\x01\\x00\\x01\"
s = socket.create_connection((\"127.0.0.1\", 53))
s.sendall(struct.pack(\"!H\", len(q)) + q)
n = struct.unpack(\"!H\", s.recv(2))[0]
a = b\"\"
while len(a) < n:
    a += s.recv(n - len(a))
print(\"tcp-dns\", struct.unpack(\"!H\", a[6:8])[0], socket.inet_ntoa(a[-4:]))"
'
echo "requests $(grep -c 'GET /blob' "$DIR/server.log")"
"#,
        fetch = FETCH.replace('"', "\\\""),
    );
    let o = scenario("hosts", &hosts, &body);
    let want = o
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("want "))
        .unwrap_or_else(|| panic!("no checksum\n{}", show(&o)))
        .to_owned();
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert!(
        lines.contains(&format!("got 3000000 {want}").as_str()),
        "{}",
        show(&o)
    );
    // A name no rule allows does not resolve at all.
    assert!(lines.contains(&"other True"), "{}", show(&o));
    // An allowed name that resolves to an internal address is rebinding.
    // The bare address is reachable only by name: a request that names the
    // address instead (its `Host`) gets the Sentry's 403, and the server
    // never sees it.
    assert!(
        o.stderr.contains(&format!(
            "egress to {SERVER}:8080 ({SERVER}) refused: the connection names {SERVER}"
        )),
        "{}",
        show(&o)
    );
    assert!(lines.contains(&"error None str"), "{}", show(&o));
    assert_eq!(
        o.stdout.matches("error 111 ConnectionRefusedError").count(),
        1,
        "{}",
        show(&o)
    );
    assert!(
        o.stderr
            .contains("rebind.example.test is allowed but resolved to an internal address"),
        "{}",
        show(&o)
    );
    assert!(lines.contains(&"1"), "resolv.conf: {}", show(&o));
    // The same name over DNS-over-TCP.
    assert!(
        lines.contains(&format!("tcp-dns 1 {SERVER}").as_str()),
        "{}",
        show(&o)
    );
    assert!(lines.contains(&"requests 1"), "{}", show(&o));
}

#[test]
fn sensitive_destinations_stay_closed_under_a_wide_rule() {
    // 0.0.0.0/0 does not open the metadata address, the host's loopback
    // (all of the guest's 127.0.0.0/8 is its own: nothing listens there in
    // the sandbox), the unspecified address, or the host's own address on
    // its link; UDP neither.
    let body = format!(
        r#"$FV do --allow-cidr 0.0.0.0/0 -- sh -c '
  python3 -I -c "{fetch}" http://169.254.169.254:8080/latest
  python3 -I -c "{fetch}" http://127.0.0.1:8080/blob
  python3 -I -c "{fetch}" http://127.0.0.2:8080/blob
  python3 -I -c "{fetch}" http://{HOST_SIDE}:8080/blob
  python3 -I -c "$1" {HOST_SIDE} 5353
' sh '{UDP_CLIENT}'
echo "log: $(wc -c < "$DIR/server.log")"
# A rule that names the host's address opens it.
$FV do --allow-cidr {HOST_SIDE}/32:8080 -- python3 -I -c '{FETCH}' http://{HOST_SIDE}:8080/blob
"#,
        fetch = FETCH.replace('"', "\\\""),
    );
    let o = scenario("sensitive", "127.0.0.1 localhost\n", &body);
    assert_refused_unseen(&o, 4);
    assert!(
        o.stdout.contains("sendto EPERM\nconnect ECONNREFUSED\n"),
        "{}",
        show(&o)
    );
    assert!(
        o.stderr.contains(&format!(
            "egress to {HOST_SIDE}:8080 refused: the host's own address"
        )),
        "{}",
        show(&o)
    );
    assert!(o.stdout.contains("got 3000000 "), "{}", show(&o));
}

#[test]
fn network_flags_are_checked() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--network", "host", "--allow-cidr", "10.0.0.0/8"],
            "do not apply to --network host",
        ),
        (
            &["--allow-cidr", "10.0.0.0/33"],
            "--allow-cidr \"10.0.0.0/33\"",
        ),
        (&["--allow-cidr", "1.2.3.4:0"], "port after the network"),
        (
            &["--allow-cidr", "127.0.0.0/8"],
            "the sandbox's own loopback",
        ),
        (&["--allow-host", "exa mple.com"], "not a domain name"),
        (
            &["--network", "none", "--allow-host", "example.com"],
            "need --network sandbox",
        ),
    ];
    for (flags, msg) in cases {
        let mut cmd = command(FERROVISOR, &[]);
        cmd.arg("do").args(*flags).args(["--", "/bin/true"]);
        let o = run(cmd, None, TIMEOUT);
        assert_eq!(o.status, 2, "{flags:?}: {}", show(&o));
        assert!(
            o.stderr.contains(msg) && o.stderr.lines().count() == 1,
            "{flags:?}: {}",
            show(&o)
        );
    }
}

/// A UDP echo server on the test's side: `udp_echo.py ADDR PORT LOG` answers
/// every datagram with itself and logs its sender and size.
const UDP_ECHO: &str = r#"
import socket, sys
host, port, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
s.bind((host, port))
with open(log, "a") as f:
    while True:
        d, a = s.recvfrom(65536)
        f.write("%s %d\n" % (a[0], len(d)))
        f.flush()
        s.sendto(d, a)
"#;

/// Python in the sandbox: UDP to `HOST PORT` with sendto/recvfrom (twenty
/// random datagrams of growing size, each checked byte for byte and by
/// sender) and with connect/send/recv; prints the verdicts, or the errno
/// of each step that failed.
const UDP_CLIENT: &str = r#"
import errno, os, socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
fam = socket.AF_INET6 if ":" in host else socket.AF_INET
def name(e):
    return errno.errorcode.get(e.errno, str(e.errno))
s = socket.socket(fam, socket.SOCK_DGRAM)
s.settimeout(10)
try:
    ok = 0
    for i in range(20):
        d = os.urandom(1 + i * 3000)
        s.sendto(d, (host, port))
        r, a = s.recvfrom(65536)
        ok += r == d and a[0] == host and a[1] == port
    print("sendto echoed", ok)
except OSError as e:
    print("sendto", name(e))
c = socket.socket(fam, socket.SOCK_DGRAM)
c.settimeout(10)
try:
    c.connect((host, port))
    c.send(b"ping over connect")
    print("connect echoed", c.recv(100), c.getpeername()[:2] == (host, port))
except OSError as e:
    print("connect", name(e))
sys.stdout.flush()
time.sleep(float(os.environ.get("LINGER", "0")))
"#;

/// Starts the UDP echo servers (`SERVER` and `SERVER6`, port 5353, log
/// `$DIR/udp.log`) in the scenario's outside.
fn udp_servers() -> String {
    format!(
        r#"cat > "$DIR/udp_echo.py" <<'PY'
{UDP_ECHO}
PY
nsenter -t $OUT -n python3 -I "$DIR/udp_echo.py" {SERVER} 5353 "$DIR/udp.log" >/dev/null 2>&1 &
PIDS="$PIDS $!"
nsenter -t $OUT -n python3 -I "$DIR/udp_echo.py" {SERVER6} 5353 "$DIR/udp.log" >/dev/null 2>&1 &
PIDS="$PIDS $!"
for i in $(seq 100); do
  [ "$(outside ss -Huan | wc -l)" -ge 2 ] && break
  sleep 0.1
done
: > "$DIR/udp.log"
"#
    )
}

#[test]
fn udp_to_an_allowed_cidr_is_relayed_both_ways() {
    let body = format!(
        r#"{servers}
$FV do --allow-cidr {SERVER}/32:5353 --allow-cidr 2001:db8::/64 --egress-log "$DIR/egress.log" -- sh -c '
  python3 -I -c "$1" {SERVER} 5353
  python3 -I -c "$1" {SERVER6} 5353
' sh '{UDP_CLIENT}'
echo "datagrams $(wc -l < "$DIR/udp.log")"
sed 's/^/log /' "$DIR/egress.log"
"#,
        servers = udp_servers()
    );
    let o = scenario("udp", "127.0.0.1 localhost\n", &body);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(
        lines.iter().filter(|l| **l == "sendto echoed 20").count(),
        2,
        "{}",
        show(&o)
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| **l == "connect echoed b'ping over connect' True")
            .count(),
        2,
        "{}",
        show(&o)
    );
    // Every datagram crossed the host once: 2 x (20 + 1).
    assert!(lines.contains(&"datagrams 42"), "{}", show(&o));
    // The first datagram of each socket to each destination is logged.
    let log: Vec<serde_json::Value> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("log "))
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert!((2..=4).contains(&log.len()), "{}", show(&o));
    for r in &log {
        assert_eq!(r["proto"], "udp", "{r}");
        assert_eq!(r["decision"], "allowed", "{r}");
        assert_eq!(r["port"], 5353, "{r}");
        assert_eq!(r["command"], "python3", "{r}");
        assert!(r["pid"].as_i64() > Some(0), "{r}");
    }
    for d in [SERVER, SERVER6] {
        assert!(log.iter().any(|r| r["dest"] == d), "{d}: {}", show(&o));
    }
}

#[test]
fn udp_without_a_rule_is_refused_without_a_host_socket() {
    // A rule for another port, and none at all. While the guest lingers
    // after its refused attempts, ferrovisor's namespace holds no UDP
    // socket: none was opened for the refused destination.
    let body = format!(
        r#"{servers}
# Each run writes its own file: the background job truncates it only when
# it runs, so a reused file could show the last run's lines.
n=0
for flags in "--allow-cidr {SERVER}/32:9999" "--network sandbox"; do
  n=$((n + 1))
  LINGER=3 $FV do $flags -- python3 -I -c '{UDP_CLIENT}' {SERVER} 5353 > "$DIR/out$n" &
  F=$!
  for i in $(seq 200); do grep -q '^connect' "$DIR/out$n" 2>/dev/null && break; sleep 0.05; done
  echo "udp sockets $(ss -Huan | wc -l)"
  wait $F
  cat "$DIR/out$n"
done
echo "datagrams refused $(wc -l < "$DIR/udp.log")"
# The measure works: an allowed guest holds a host UDP socket for each of
# its two sockets.
LINGER=3 $FV do --allow-cidr {SERVER}/32:5353 -- python3 -I -c '{UDP_CLIENT}' {SERVER} 5353 > "$DIR/allowed" &
F=$!
for i in $(seq 200); do grep -q '^connect' "$DIR/allowed" 2>/dev/null && break; sleep 0.05; done
echo "allowed: udp sockets $(ss -Huan | wc -l)"
wait $F
cat "$DIR/allowed"
"#,
        servers = udp_servers()
    );
    let o = scenario("udpdeny", "127.0.0.1 localhost\n", &body);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(
        lines.iter().filter(|l| **l == "sendto EPERM").count(),
        2,
        "{}",
        show(&o)
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| **l == "connect ECONNREFUSED")
            .count(),
        2,
        "{}",
        show(&o)
    );
    assert_eq!(
        lines.iter().filter(|l| **l == "udp sockets 0").count(),
        2,
        "{}",
        show(&o)
    );
    assert!(lines.contains(&"datagrams refused 0"), "{}", show(&o));
    assert!(lines.contains(&"allowed: udp sockets 2"), "{}", show(&o));
    assert!(lines.contains(&"sendto echoed 20"), "{}", show(&o));
    // Each refusal is on stderr with the destination: sendto and connect,
    // twice.
    assert_eq!(
        o.stderr
            .matches(&format!("egress to {SERVER}:5353 refused"))
            .count(),
        4,
        "{}",
        show(&o)
    );
}

/// Python in the sandbox: the local address of a connection out.
const SOCKNAME: &str = r#"
import socket, sys
s = socket.create_connection((sys.argv[1], 8080), timeout=20)
print("sockname", s.getsockname()[0])
"#;

/// What the guest sees of its network in `--network sandbox` agrees with
/// what its sockets do: `ip -4 addr` lists the netstack's address (the one
/// a connection out is bound to), `ip route` a default route through its
/// interface, and the interface shows up wherever programs look for it.
/// None of the namespace's own addresses are shown.
#[test]
fn sandbox_ip_addr_and_route_list_the_netstack_interface() {
    let body = format!(
        r#"$FV do --allow-cidr {SERVER}/32:8080 -- sh -c '
PATH=/usr/sbin:/usr/bin:/sbin:/bin
ip -4 addr; echo --; ip route; echo --; ip route show table local; echo --
ip -6 route; echo --; ls /sys/class/net; cat /sys/class/net/eth0/address /sys/class/net/eth0/operstate
busybox ip addr show eth0; echo --; cat /proc/net/dev
python3 -I -c "$0" {SERVER}' '{SOCKNAME}'
"#
    );
    let o = scenario("ifaces", "127.0.0.1 localhost\n", &body);
    for want in [
        "2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP group default qlen 1000",
        "    inet 10.0.2.15/24 scope global eth0",
        "    inet 127.0.0.1/8 scope host lo",
        "default dev eth0 scope link \n10.0.2.0/24 dev eth0 proto kernel scope link src 10.0.2.15 \n--",
        "local 10.0.2.15 dev eth0 proto kernel scope host src 10.0.2.15 \n\
         broadcast 10.0.2.255 dev eth0 proto kernel scope link src 10.0.2.15 \n\
         local 127.0.0.0/8 dev lo",
        "fd00::/64 dev eth0 proto kernel metric 256 pref medium\n\
         default dev eth0 metric 1024 pref medium",
        "eth0\nlo\n02:42:0a:00:02:0f\nup\n",
        "link/ether 02:42:0a:00:02:0f brd ff:ff:ff:ff:ff:ff",
        "  eth0:       0",
        "sockname 10.0.2.15",
    ] {
        assert!(o.stdout.contains(want), "no {want:?}\n{}", show(&o));
    }
    assert!(!o.stderr.contains("SIOCGIF"), "{}", show(&o));
    for host_side in [HOST_SIDE, "10.99.0.2", "2001:db8::1"] {
        assert!(!o.stdout.contains(host_side), "{host_side}\n{}", show(&o));
    }
}

/// Python in the sandbox: a TCP and a UDP socket bound to the sandbox's own
/// address (`10.0.2.15` or `fd00::15`, with a port of its choosing) reach
/// an allowed destination outside, and keep that address and port.
const BOUND_OUT: &str = r#"
import errno, socket, sys
own, server = sys.argv[1], sys.argv[2]
fam = socket.AF_INET6 if ":" in own else socket.AF_INET
def name(e):
    return errno.errorcode.get(e.errno, str(e.errno))
s = socket.socket(fam)
s.bind((own, 0))
port = s.getsockname()[1]
s.settimeout(20)
try:
    s.connect((server, 8080))
    print("tcp out from", s.getsockname()[0], s.getsockname()[1] == port)
    s.sendall(b"GET /blob HTTP/1.0\r\n\r\n")
    print("tcp answer", s.recv(12))
except OSError as e:
    print("tcp out", name(e))
u = socket.socket(fam, socket.SOCK_DGRAM)
u.bind((own, 0))
u.settimeout(10)
try:
    u.sendto(b"bound datagram", (server, 5353))
    d, a = u.recvfrom(100)
    print("udp echoed", d, a[0] == server, u.getsockname()[0])
except OSError as e:
    print("udp out", name(e))
"#;

/// A socket bound to the sandbox's own address connects out to what the
/// rules allow, over IPv4 and IPv6 (issue 7: binding the interface
/// address); a destination without a rule is still refused.
#[test]
fn sockets_bound_to_the_sandbox_address_reach_allowed_destinations() {
    let body = format!(
        r#"{servers}
$FV do --allow-cidr {SERVER}/32 --allow-cidr 2001:db8::/64 -- sh -c '
  python3 -I -c "$1" 10.0.2.15 {SERVER}
  python3 -I -c "$1" fd00::15 {SERVER6}
  python3 -I -c "$1" 10.0.2.15 {INTERNAL}
' sh '{BOUND_OUT}'
"#,
        servers = udp_servers()
    );
    // The IPv6 server answers UDP only.
    let o = scenario("boundout", "127.0.0.1 localhost\n", &body);
    let lines: Vec<&str> = o.stdout.lines().collect();
    for want in [
        "tcp out from 10.0.2.15 True",
        "tcp answer b'HTTP/1.0 200'",
        "udp echoed b'bound datagram' True 10.0.2.15",
        "tcp out ECONNREFUSED",
        "udp echoed b'bound datagram' True fd00::15",
        "udp out EPERM",
    ] {
        assert!(lines.contains(&want), "no {want:?}\n{}", show(&o));
    }
    assert!(
        o.stderr
            .contains(&format!("egress to {INTERNAL}:8080 refused")),
        "{}",
        show(&o)
    );
}
