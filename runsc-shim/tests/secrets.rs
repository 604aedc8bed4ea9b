//! Secrets, connection-level egress rules and the audit log (issue 19).
//!
//! Each test runs in mount and network namespaces of its own, joined by a
//! veth pair to an "outside" namespace where two hosts (`api.test` and
//! `other.test`) serve HTTP on port 80 and HTTPS on 443 with certificates of
//! the test's own CA. That CA is trusted on the host side only (the runtime's
//! `SSL_CERT_FILE`); the guest trusts the sandbox's CA. Every request the
//! servers get is logged with its `Authorization` header.

mod common;

use std::time::Duration;

use common::{command, run, show, Outcome, TempDir};

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");
const TIMEOUT: Duration = Duration::from_secs(180);
const API: &str = "198.51.100.7";
const OTHER: &str = "198.51.100.8";
const TOKEN: &str = "s3cr3t-7f1d2c-real-value";

/// Logs each request as a JSON line and answers with it.
const SERVER: &str = r#"
import http.server, json, ssl, sys
addr, port, label, log = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        rec = {"server": label, "method": self.command, "path": self.path,
               "host": self.headers.get("Host"), "auth": self.headers.get("Authorization"),
               "body": body.decode("latin-1")}
        with open(log, "a") as f:
            f.write(json.dumps(rec) + "\n")
        # Not the request back: a host that echoes a secret hands it to
        # the guest, whatever the sandbox does.
        out = json.dumps({"server": label, "path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    do_GET = do_POST = do_PUT = do_HEAD = answer
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer((addr, port), H)
if len(sys.argv) > 5:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[5], sys.argv[6])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
"#;

/// A Java client: GET of its argument with `Authorization: Bearer $TOKEN`.
const JAVA_CLIENT: &str = r#"
import java.net.URI;
import java.net.http.*;
public class Get {
  public static void main(String[] a) throws Exception {
    var r = HttpRequest.newBuilder(URI.create(a[0]))
        .header("Authorization", "Bearer " + System.getenv("TOKEN")).build();
    HttpClient.newHttpClient().send(r, HttpResponse.BodyHandlers.ofString());
  }
}
"#;

/// Runs `body` (shell) with the two hosts up outside, `$FV` the binary,
/// `$DIR` a scratch directory (`$DIR/seen`: the servers' log, `Get.java`,
/// `$DIR/egress.log`: for `--egress-log`), and `$CA` the test's CA.
fn scenario(label: &str, body: &str) -> Outcome {
    let dir = TempDir::new(label);
    std::fs::write(dir.path().join("server.py"), SERVER).expect("server");
    std::fs::write(dir.path().join("Get.java"), JAVA_CLIENT).expect("client");
    std::fs::write(
        dir.path().join("hosts"),
        format!("127.0.0.1 localhost\n{API} api.test\n{OTHER} other.test\n"),
    )
    .expect("hosts");
    let net = common::outside_namespace(
        &[&format!("{API}/24"), &format!("{OTHER}/24")],
        &["198.51.100.1/24"],
    );
    let script = format!(
        r#"set -e
cd "$DIR"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem -days 2 -subj "/CN=test CA" 2>/dev/null
for h in api.test other.test; do
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout $h.key -out $h.csr -subj "/CN=$h" 2>/dev/null
  printf "subjectAltName=DNS:$h\n" > $h.ext
  openssl x509 -req -in $h.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out $h.pem -days 2 -extfile $h.ext 2>/dev/null
done
CA="$DIR/ca.pem"
{net}for a in "{API} api" "{OTHER} other"; do
  set -- $a
  nsenter -t $OUT -n python3 server.py $1 80 $2-http "$DIR/seen" &
  PIDS="$PIDS $!"
  nsenter -t $OUT -n python3 server.py $1 443 $2-https "$DIR/seen" $2.test.pem $2.test.key &
  PIDS="$PIDS $!"
done
for i in $(seq 100); do
  python3 -c "import socket; [socket.create_connection((a, p)).close() for a in ('{API}', '{OTHER}') for p in (80, 443)]" 2>/dev/null && break
  sleep 0.1
done
: > "$DIR/seen"
cd /
set +e
{body}
"#
    );
    common::in_namespaces(FERROVISOR, dir.path(), &script, TIMEOUT)
}

/// The JSON lines after `marker` in the output, up to the next marker.
fn section(o: &Outcome, marker: &str) -> Vec<serde_json::Value> {
    o.stdout
        .split(marker)
        .nth(1)
        .unwrap_or("")
        .lines()
        .take_while(|l| !l.starts_with("=== "))
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// What the servers saw from `server` with a request line of `path`.
fn auth_seen<'a>(seen: &'a [serde_json::Value], server: &str, path: &str) -> Vec<&'a str> {
    seen.iter()
        .filter(|r| r["server"] == server && r["path"] == path)
        .map(|r| r["auth"].as_str().unwrap_or("(none)"))
        .collect()
}

#[test]
fn a_secret_reaches_only_its_host_and_never_the_sandbox() {
    // api.test gets the secret; other.test is intercepted too (an HTTP
    // rule) but gets the placeholder. Each client in the sandbox sends
    // `Authorization: Bearer $TOKEN`.
    // The guest looks for the value spelled backwards: its own command
    // line must not hold the value the memory scan looks for.
    let reversed: String = TOKEN.chars().rev().collect();
    let body = format!(
        r#"export REAL_TOKEN={TOKEN}
mkdir "$DIR/sync"
cp "$DIR/Get.java" "$DIR/sync/"
SSL_CERT_FILE=$CA timeout -s KILL 150 $FV do -v "$DIR/sync:/sync" --allow-host api.test --allow-http 'other.test:GET,POST' \
  --secret TOKEN=env:REAL_TOKEN:api.test --secret BODY_TOKEN=env:REAL_TOKEN:api.test:body \
  --egress-log "$DIR/egress.log" -- sh -c '
  for h in api.test other.test; do
    curl -sS -o /dev/null -H "Content-Type: application/json" -d "{{\"token\": \"$BODY_TOKEN\"}}" https://$h/body
    curl -sS -o /dev/null -H "Authorization: Bearer $TOKEN" https://$h/curl
    python3 -I -c "import os, urllib.request as u; u.urlopen(u.Request(\"https://$h/urllib\", headers={{\"Authorization\": \"Bearer \" + os.environ[\"TOKEN\"]}})).read()"
    if python3 -c "import requests" 2>/dev/null; then
      python3 -c "import os, requests; requests.get(\"https://$h/requests\", headers={{\"Authorization\": \"Bearer \" + os.environ[\"TOKEN\"]}})"
    fi
    node -e "fetch(\"https://$h/node\", {{headers: {{Authorization: \"Bearer \" + process.env.TOKEN}}}}).then(r => r.text())"
    git -c http.extraHeader="Authorization: Bearer $TOKEN" ls-remote https://$h/repo.git >/dev/null 2>&1
    # Java: its own trust store (the JKS cacerts), made to hold the CA.
    if [ -x /usr/bin/java ]; then java /sync/Get.java https://$h/java; fi
  done
  echo "=== guest"
  echo "env: $(env | rev | grep -c {reversed})"
  echo "proc: $(cat /proc/self/environ /proc/1/environ 2>/dev/null | tr "\\0" "\\n" | rev | grep -c {reversed})"
  echo "placeholder: $(echo $TOKEN | grep -c ^ferrovisor-secret-)"
  echo "guest core: $(ulimit -c)"
  # Held until the memory file has been scanned from outside.
  touch /sync/served
  for i in $(seq 1200); do [ -e /sync/scanned ] && break; sleep 0.05; done
' &
SB=$!
# The whole memory file of the sandbox, from outside, once every client
# has been served.
for i in $(seq 1200); do
  [ -e "$DIR/sync/served" ] && break
  sleep 0.05
done
# Only this sandbox's (other sandboxes may be running beside it): a
# process below $SB.
ours() {{
  p=$1
  while [ "$p" -gt 1 ] 2>/dev/null; do
    [ "$p" = "$SB" ] && return 0
    p=$(sed -n 's/^PPid:[[:space:]]*//p' /proc/$p/status 2>/dev/null)
  done
  return 1
}}
for i in $(seq 200); do
  M=$(for f in /proc/[0-9]*/fd/*; do case "$(readlink $f 2>/dev/null)" in *ferrovisor-memory*) p=${{f#/proc/}}; ours ${{p%%/*}} && echo $f;; esac; done | head -1)
  [ -n "$M" ] && python3 - "$M" <<'EOF' && break
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
end = os.lseek(fd, 0, os.SEEK_END)
pos, real, placeholder, size = 0, 0, 0, 0
while pos < end:
    try:
        pos = os.lseek(fd, pos, os.SEEK_DATA)
    except OSError:
        break
    hole = os.lseek(fd, pos, os.SEEK_HOLE)
    while pos < hole:
        n = min(hole - pos, 1 << 20)
        b = os.pread(fd, n + 64, pos)
        real += b.count(b"{TOKEN}")
        placeholder += b.count(b"ferrovisor-secret-")
        size += n
        pos += n
print("scan:", "real", real, "placeholder", placeholder > 0, "scanned", size > 0)
EOF
  sleep 0.1
done
# The Sentry, which holds the value, leaves no core file; the guest keeps
# the caller's limit.
for f in /proc/[0-9]*/fd/*; do
  case "$(readlink $f 2>/dev/null)" in *ferrovisor-memory*)
    q=${{f#/proc/}}; q=${{q%%/*}}
    [ "$(cat /proc/$q/comm)" = ferrovisor ] && ours $q && echo "sentry core: $(sed -n 's/^Max core file size *//p' /proc/$q/limits)";;
  esac
done | sort -u
echo "host core: $(ulimit -c)"
touch "$DIR/sync/scanned"
wait $SB
echo "=== seen"
cat "$DIR/seen"
echo "=== log"
cat "$DIR/egress.log"
"#
    );
    let o = scenario("secrets", &body);
    let seen = section(&o, "=== seen");
    let want = format!("Bearer {TOKEN}");
    let mut clients = vec![
        "/curl",
        "/urllib",
        "/node",
        "/repo.git/info/refs?service=git-upload-pack",
    ];
    if o.stdout.contains("\"path\": \"/requests\"") {
        clients.push("/requests");
    }
    if std::path::Path::new("/usr/bin/java").exists() {
        clients.push("/java");
    }
    for path in &clients {
        assert_eq!(
            auth_seen(&seen, "api-https", path),
            vec![want.as_str()],
            "{path}: {}",
            show(&o)
        );
        let other = auth_seen(&seen, "other-https", path);
        assert_eq!(other.len(), 1, "{path}: {}", show(&o));
        assert!(
            other[0].starts_with("Bearer ferrovisor-secret-"),
            "{path} to other.test carries the placeholder: {}",
            show(&o)
        );
    }
    // `:body`: in the body too, Content-Length made anew (the server read
    // the whole body); elsewhere the placeholder.
    let bodies: Vec<(&str, &str)> = seen
        .iter()
        .filter(|r| r["path"] == "/body")
        .map(|r| {
            (
                r["server"].as_str().unwrap_or(""),
                r["body"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        bodies.iter().find(|b| b.0 == "api-https").map(|b| b.1),
        Some(format!("{{\"token\": \"{TOKEN}\"}}").as_str()),
        "{}",
        show(&o)
    );
    assert!(
        bodies
            .iter()
            .any(|b| b.0 == "other-https" && b.1.contains("\"ferrovisor-secret-")),
        "{}",
        show(&o)
    );
    // Nowhere in the sandbox: its environment, /proc, its memory file
    // (which does hold the placeholder: the scan sees the guest's pages).
    assert!(o.stdout.contains("env: 0\n"), "{}", show(&o));
    assert!(o.stdout.contains("proc: 0\n"), "{}", show(&o));
    assert!(o.stdout.contains("placeholder: 1\n"), "{}", show(&o));
    let sentry_core: Vec<&str> = o
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("sentry core: "))
        .collect();
    assert_eq!(sentry_core.len(), 1, "{}", show(&o));
    assert_eq!(
        sentry_core[0].split_whitespace().collect::<Vec<_>>(),
        ["1", "1", "bytes"],
        "{}",
        show(&o)
    );
    let core = |who: &str| {
        o.stdout
            .lines()
            .find_map(|l| l.strip_prefix(who))
            .map(str::to_owned)
    };
    assert!(core("host core: ").is_some(), "{}", show(&o));
    assert_eq!(core("guest core: "), core("host core: "), "{}", show(&o));
    assert!(
        o.stdout
            .contains("scan: real 0 placeholder True scanned True"),
        "{}",
        show(&o)
    );
    // One log line per connection, secrets counted, never written.
    let log = section(&o, "=== log");
    assert!(!o
        .stdout
        .split("=== log")
        .nth(1)
        .unwrap_or("")
        .contains(TOKEN));
    let to_api: Vec<_> = log
        .iter()
        .filter(|r| r["name"] == "api.test" && r["decision"] == "allowed")
        .collect();
    assert!(to_api.len() >= clients.len(), "{}", show(&o));
    for r in &to_api {
        assert_eq!(r["name_from"], "sni", "{r}");
        assert!(r["secrets_substituted"].as_u64() >= Some(1), "{r}");
        assert!(r["bytes_out"].as_u64() > Some(0), "{r}");
        assert!(r["bytes_in"].as_u64() > Some(0), "{r}");
        assert_eq!(r["dest"], API, "{r}");
        assert_eq!(r["port"], 443, "{r}");
        assert!(r["pid"].as_i64() > Some(0), "{r}");
        for key in ["time", "command", "rule", "duration_ms"] {
            assert!(!r[key].is_null(), "{key}: {r}");
        }
    }
    assert!(log
        .iter()
        .filter(|r| r["name"] == "other.test")
        .all(|r| r["secrets_substituted"] == 0));
}

#[test]
fn a_connection_must_name_an_allowed_host() {
    // Allowed by name: the connection's SNI or Host must be that name, and
    // the name must have resolved to the address dialled.
    let body = r#"SSL_CERT_FILE=$CA timeout -s KILL 120 $FV do --allow-host api.test --allow-host other.test \
  --allow-http 'api.test:GET' --egress-log "$DIR/egress.log" -- sh -c '
  getent hosts other.test >/dev/null
  echo "host-ok $(curl -s -o /dev/null -w %{http_code} http://api.test/plain)"
  echo "host-front $(curl -s -w " %{http_code}" -H "Host: other.test" http://api.test/front)"
  echo "sni-ok $(curl -s -o /dev/null -w %{http_code} https://api.test/tls)"
  curl -sS --connect-to other.test:443:api.test:443 https://other.test/front2 2>&1 | sed "s/^/sni-front /"
  echo "ip $(curl -s -o /dev/null -w %{http_code} http://198.51.100.7/by-address)"
  echo "post $(curl -s -w " %{http_code}" -X POST -d x=1 https://api.test/post)"
  python3 -c "
import socket
s = socket.create_connection((\"api.test\", 80), timeout=20)
for b in b\"GET /slow HTTP/1.1\\r\\nHost: api.test\\r\\nConnection: close\\r\\n\\r\\n\":
    s.send(bytes([b]))
print(\"slow\", s.recv(12))
"
  python3 -c "
import socket
s = socket.create_connection((\"api.test\", 22), timeout=20)
s.sendall(b\"SSH-2.0-test\r\n\")
try:
    print(\"raw\", s.recv(10))
except OSError as e:
    print(\"raw\", e.errno)
"
'
echo "=== seen"
cat "$DIR/seen"
echo "=== log"
cat "$DIR/egress.log"
"#;
    let o = scenario("fronting", body);
    let seen = section(&o, "=== seen");
    let paths: Vec<&str> = seen.iter().filter_map(|r| r["path"].as_str()).collect();
    // What was allowed reached the server; nothing else did.
    assert!(o.stdout.contains("host-ok 200\n"), "{}", show(&o));
    assert!(o.stdout.contains("sni-ok 200\n"), "{}", show(&o));
    assert_eq!(paths, vec!["/plain", "/tls", "/slow"], "{}", show(&o));
    // A head written a byte at a time is checked once whole.
    assert!(o.stdout.contains("slow b'HTTP/1.1 200'"), "{}", show(&o));
    // Refused by the Sentry: a 403 over HTTP, an alert over TLS.
    assert!(
        o.stdout
            .contains("host-front ferrovisor: refused: the connection names other.test"),
        "{}",
        show(&o)
    );
    assert!(o.stdout.contains(" 403\n"), "{}", show(&o));
    assert!(
        o.stdout.contains("sni-front") && o.stdout.contains("unrecognized name"),
        "{}",
        show(&o)
    );
    assert!(o.stdout.contains("ip 403\n"), "{}", show(&o));
    assert!(
        o.stdout
            .contains("post ferrovisor: refused: POST to api.test is not allowed"),
        "{}",
        show(&o)
    );
    // Another protocol to an address allowed by name: reset.
    assert!(o.stdout.contains("raw 104\n"), "{}", show(&o));
    let log = section(&o, "=== log");
    let refused = |name: &str| {
        log.iter()
            .filter(|r| r["decision"] == "refused" && r["name"] == name)
            .count()
    };
    assert_eq!(refused("other.test"), 2, "{}", show(&o));
    assert_eq!(refused("198.51.100.7"), 1, "{}", show(&o));
    assert!(
        log.iter().any(|r| r["decision"] == "refused"
            && r["name"] == "api.test"
            && r["rule"]
                .as_str()
                .is_some_and(|s| s.contains("POST to api.test"))),
        "{}",
        show(&o)
    );
    assert!(
        log.iter()
            .any(|r| r["decision"] == "refused" && r["port"] == 22 && r["name"].is_null()),
        "{}",
        show(&o)
    );
    assert_eq!(
        log.iter().filter(|r| r["decision"] == "allowed").count(),
        3,
        "{}",
        show(&o)
    );
}

#[test]
fn secret_and_rule_flags_are_checked() {
    let fv = |args: &[&str]| {
        let mut c = command(FERROVISOR, &[]);
        c.args(args);
        run(c, None, Duration::from_secs(30))
    };
    for (args, want) in [
        (
            &["do", "--secret", "TOKEN=abc:api.test", "--", "true"][..],
            "never the command line",
        ),
        (
            &[
                "do",
                "--secret",
                "TOKEN=@/nonexistent/file:api.test",
                "--",
                "true",
            ][..],
            "cannot read /nonexistent/file",
        ),
        (
            &[
                "do",
                "--secret",
                "TOKEN=env:FV_UNSET_VAR:api.test",
                "--",
                "true",
            ][..],
            "FV_UNSET_VAR is not set",
        ),
        (
            &[
                "do",
                "--network",
                "none",
                "--allow-http",
                "a.test:GET",
                "--",
                "true",
            ][..],
            "need --network sandbox",
        ),
        (
            &["do", "--allow-http", "a.test:", "--", "true"][..],
            "--allow-http",
        ),
        (
            &["do", "--allow-host", "a.test:22", "--", "true"][..],
            "PORT/tcp",
        ),
    ] {
        let o = fv(args);
        assert_eq!(o.status, 2, "{args:?}: {}", show(&o));
        assert_eq!(o.stderr.lines().count(), 1, "{args:?}: {}", show(&o));
        assert!(o.stderr.contains(want), "{args:?}: {}", show(&o));
    }
}

#[test]
fn rules_change_while_the_sandbox_runs() {
    // other.test: refused, then allowed after `update --allow-host`, then
    // refused again after `--deny-host` (dialled by address the last time,
    // so the connection itself is refused, not only the name).
    let body = r#"mkdir "$DIR/sync"
timeout -s KILL 120 $FV do --control-socket "$DIR/ctl" -v "$DIR/sync:/sync" --allow-host api.test \
  --egress-log "$DIR/egress.log" -- sh -c '
  wait_for() { while [ ! -e /sync/$1 ]; do sleep 0.05; done; }
  echo "before $(curl -s -o /dev/null -w %{http_code} http://other.test/before)"
  touch /sync/g1; wait_for h1
  echo "allowed $(curl -s -o /dev/null -w %{http_code} http://other.test/allowed)"
  touch /sync/g2; wait_for h2
  echo "denied $(curl -s -o /dev/null -w %{http_code} --resolve other.test:80:198.51.100.8 http://other.test/denied)"
  echo "api $(curl -s -o /dev/null -w %{http_code} http://api.test/api)"
' &
SB=$!
wait_for() { for i in $(seq 600); do [ -e "$DIR/sync/$1" ] && return; sleep 0.05; done; }
wait_for g1
$FV update --control-socket "$DIR/ctl" --allow-host other.test; echo "update1 $?"
touch "$DIR/sync/h1"
wait_for g2
$FV update --control-socket "$DIR/ctl" --deny-host other.test; echo "update2 $?"
touch "$DIR/sync/h2"
wait $SB
$FV update --control-socket "$DIR/ctl" --allow-host 'bad name' 2>&1; echo "bad $?"
echo "=== seen"
cat "$DIR/seen"
echo "=== log"
cat "$DIR/egress.log"
"#;
    let o = scenario("update", body);
    for want in [
        "before 000\n",
        "update1 0\n",
        "allowed 200\n",
        "update2 0\n",
        "denied 000\n",
        "api 200\n",
        "bad 1\n",
    ] {
        assert!(o.stdout.contains(want), "{want}: {}", show(&o));
    }
    let seen = section(&o, "=== seen");
    let paths: Vec<&str> = seen.iter().filter_map(|r| r["path"].as_str()).collect();
    assert_eq!(paths, vec!["/allowed", "/api"], "{}", show(&o));
    let log = section(&o, "=== log");
    let to_other: Vec<&str> = log
        .iter()
        .filter(|r| r["dest"] == OTHER)
        .filter_map(|r| r["decision"].as_str())
        .collect();
    // The first attempt never got an address (the DNS refused the name).
    assert_eq!(to_other, vec!["allowed", "refused"], "{}", show(&o));
    assert!(
        o.stderr
            .contains("refused: other.test is denied by --deny-host"),
        "{}",
        show(&o)
    );
}
