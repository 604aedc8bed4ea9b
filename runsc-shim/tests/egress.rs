//! `--network sandbox` and the egress policy (issue 7, points 3 to 6).
//!
//! Each test runs in network and mount namespaces of its own (`unshare -m -n
//! --propagation private`): a veth interface carries a test address, a
//! Python HTTP server listens on it and logs every request it gets, and
//! `/etc/hosts` is bind-mounted so that the Sentry's DNS server (which asks
//! the host's resolver) has names to find. Nothing changes on the host.

mod common;

use std::time::Duration;

use common::{command, run, Outcome, TempDir};

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");
const TIMEOUT: Duration = Duration::from_secs(120);

/// A public-looking test address (TEST-NET-2) and an internal one.
const SERVER: &str = "198.51.100.7";
const INTERNAL: &str = "10.99.0.1";

/// Runs `body` (shell) in private namespaces where `$SERVER` (public) and
/// `$INTERNAL` serve `$DIR/blob` over HTTP on port 8080 (logs in
/// `$DIR/server.log`), `$DIR/hosts` is `/etc/hosts`, and `$FV` is the
/// ferrovisor binary.
fn scenario(label: &str, hosts: &str, body: &str) -> Outcome {
    let dir = TempDir::new(label);
    std::fs::write(dir.path().join("hosts"), hosts).expect("hosts");
    let script = format!(
        r#"set -e
ip link set lo up
ip link add fv0 type veth peer name fv1
ip link set fv1 up
ip addr add {SERVER}/24 dev fv0
ip addr add {INTERNAL}/24 dev fv0
ip link set fv0 up
mount --bind "$DIR/hosts" /etc/hosts
head -c 3000000 /dev/urandom > "$DIR/blob"
cd "$DIR"
python3 -m http.server --bind {SERVER} 8080 2>>"$DIR/server.log" >/dev/null &
S1=$!
python3 -m http.server --bind {INTERNAL} 8080 2>>"$DIR/server.log" >/dev/null &
S2=$!
python3 -m http.server --bind 127.0.0.1 8080 2>>"$DIR/server.log" >/dev/null &
S3=$!
trap 'kill $S1 $S2 $S3 2>/dev/null' EXIT
for i in $(seq 100); do
  python3 -c "import socket; [socket.create_connection((a, 8080)).close() for a in ('{SERVER}', '{INTERNAL}', '127.0.0.1')]" 2>/dev/null && break
  sleep 0.1
done
: > "$DIR/server.log"
cd /
set +e
{body}
"#
    );
    let mut cmd = command("unshare", &[("FV", FERROVISOR)]);
    cmd.env("DIR", dir.path());
    cmd.args(["-m", "-n", "--propagation", "private", "sh", "-c", &script]);
    run(cmd, None, TIMEOUT)
}

fn show(o: &Outcome) -> String {
    format!(
        "exit {}\n--- stdout ---\n{}--- stderr ---\n{}",
        o.status, o.stdout, o.stderr
    )
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
    // The bare address was allowed only through the name's resolution:
    // still allowed (it is public), as the name resolved to it.
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
    assert!(lines.contains(&"requests 2"), "{}", show(&o));
}

#[test]
fn sensitive_destinations_stay_closed_under_a_wide_rule() {
    // 0.0.0.0/0 does not open the metadata address, the host's loopback
    // (the guest's 127.0.0.1 is its own) or the unspecified address.
    let body = format!(
        r#"$FV do --allow-cidr 0.0.0.0/0 -- sh -c '
  python3 -I -c "{fetch}" http://169.254.169.254:8080/latest
  python3 -I -c "{fetch}" http://127.0.0.1:8080/blob
  python3 -I -c "{fetch}" http://127.0.0.2:8080/blob
'
echo "log: $(wc -c < "$DIR/server.log")"
"#,
        fetch = FETCH.replace('"', "\\\""),
    );
    let o = scenario("sensitive", "127.0.0.1 localhost\n", &body);
    assert_refused_unseen(&o, 3);
}

#[test]
fn network_flags_are_checked() {
    let cases: &[(&[&str], &str)] = &[
        (&["--network", "host"], "--network host is not supported"),
        (
            &["--allow-cidr", "10.0.0.0/33"],
            "--allow-cidr \"10.0.0.0/33\"",
        ),
        (&["--allow-cidr", "1.2.3.4:0"], "port after the network"),
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
