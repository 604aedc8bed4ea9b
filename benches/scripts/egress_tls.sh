#!/bin/sh
# Cost of TLS interception (issue 19): per-request latency (a new HTTPS
# connection each) and a 100 MB download, natively, through the sandbox's
# relay end to end (allowed by name), and intercepted (a host with a
# secret). Run as root: it makes its own mount and network namespaces.
#   benches/scripts/egress_tls.sh [FERROVISOR] [REQUESTS]
set -eu
FV=${1:-target/release/ferrovisor}
N=${2:-200}
FV=$(realpath "$FV")
exec unshare -m -n --propagation private sh -s "$FV" "$N" <<'INNER'
set -eu
FV=$1 N=$2
DIR=$(mktemp -d /var/tmp/fv-egress-bench.XXXX)
cd "$DIR"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem -days 2 -subj "/CN=bench CA" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout s.key -out s.csr -subj "/CN=bench.test" 2>/dev/null
printf "subjectAltName=DNS:bench.test\n" > s.ext
openssl x509 -req -in s.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out s.pem -days 2 -extfile s.ext 2>/dev/null
head -c 100000000 /dev/zero > blob
echo ok > small
cat > server.py <<'EOF'
import http.server, ssl, sys, os
os.chdir(sys.argv[1])
class H(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go in separate writes: without this, delayed ACKs
    # add 40 ms to every request.
    disable_nagle_algorithm = True
    def log_message(self, *a): pass
srv = http.server.ThreadingHTTPServer(("198.51.100.9", 443), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain("s.pem", "s.key")
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
EOF
cat > client.py <<'EOF'
import http.client, ssl, sys, time
n, cafile = int(sys.argv[1]), (sys.argv[2] or None)
ctx = ssl.create_default_context(cafile=cafile)
def get(path):
    c = http.client.HTTPSConnection("bench.test", 443, context=ctx)
    c.request("GET", path, headers={"Authorization": "Bearer x"})
    r = c.getresponse()
    size = 0
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        size += len(b)
    c.close()
    return size
get("/small")
t = time.perf_counter()
for _ in range(n):
    get("/small")
lat = (time.perf_counter() - t) / n * 1000
t = time.perf_counter()
size = get("/blob")
mbs = size / (time.perf_counter() - t) / 1e6
print(f"{lat:.2f} ms/request, {mbs:.0f} MB/s")
EOF
printf '127.0.0.1 localhost\n198.51.100.9 bench.test\n' > hosts
ip link set lo up
unshare -n sleep 600 &
OUT=$!
trap 'kill $OUT $SRV 2>/dev/null; rm -rf "$DIR"' EXIT
while [ "$(readlink /proc/$OUT/ns/net)" = "$(readlink /proc/self/ns/net)" ]; do sleep 0.01; done
ip link add fv0 type veth peer name fv1
ip link set fv0 netns $OUT
nsenter -t $OUT -n ip link set lo up
nsenter -t $OUT -n ip addr add 198.51.100.9/24 dev fv0
nsenter -t $OUT -n ip link set fv0 up
ip addr add 198.51.100.1/24 dev fv1
ip link set fv1 up
mount --bind hosts /etc/hosts
nsenter -t $OUT -n python3 server.py "$DIR" &
SRV=$!
for i in $(seq 100); do python3 -c "import socket; socket.create_connection(('198.51.100.9', 443)).close()" 2>/dev/null && break; sleep 0.1; done
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $N requests"
printf "native:                 "; python3 client.py "$N" "$DIR/ca.pem"
printf "sandbox, end to end:    "; "$FV" do -v "$DIR:/b:ro" --allow-host bench.test -- python3 /b/client.py "$N" /b/ca.pem
export BENCH_TOKEN=t0ken
printf "sandbox, intercepted:   "; SSL_CERT_FILE="$DIR/ca.pem" "$FV" do -v "$DIR:/b:ro" --allow-host bench.test \
  --secret TOKEN=env:BENCH_TOKEN:bench.test -- python3 /b/client.py "$N" ""
INNER
