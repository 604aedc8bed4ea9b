#!/usr/bin/env python3
"""Figures for agent sandboxes, through `ferrovisor serve` and the SDK:
create-to-first-exec, exec round trips, streaming latency, and the host
memory of N sandboxes alive at once (PSS of every host process of theirs).

Usage (as root): benches/scripts/agents.py [FERROVISOR] [N]
"""

import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "sdk", "python"))
from ferrovisor import Client, Sandbox  # noqa: E402

BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "target", "release", "ferrovisor")
N = int(sys.argv[2]) if len(sys.argv) > 2 else 100


def cpu():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"


def pss_kib(pid):
    try:
        for line in open(f"/proc/{pid}/smaps_rollup"):
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree(pid):
    """pid and every descendant."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def ms(xs):
    xs = sorted(xs)
    return f"median {statistics.median(xs) * 1e3:.2f} ms, p90 {xs[int(len(xs) * 0.9)] * 1e3:.2f} ms"


def main():
    root = tempfile.mkdtemp(prefix="ferrovisor-agents-bench-")
    sock = os.path.join(root, "api.sock")
    serve = subprocess.Popen([BIN, "--root", root, "serve", "--listen", "unix:" + sock],
                             stderr=subprocess.PIPE, text=True)
    serve.stderr.readline()
    c = Client(sock, timeout=600)
    print(f"CPU: {cpu()}, {os.cpu_count()} CPUs; ferrovisor: {BIN}")
    try:
        firsts = []
        for i in range(10):
            t = time.perf_counter()
            sb = Sandbox.create(f"first{i}", client=c)
            sb.exec(["/bin/true"], check=True)
            firsts.append(time.perf_counter() - t)
            sb.close()
        print(f"create to first exec (/bin/true done): {ms(firsts)}")

        sb = Sandbox.create("rt", client=c)
        execs = []
        for _ in range(100):
            t = time.perf_counter()
            sb.exec(["/bin/true"], check=True)
            execs.append(time.perf_counter() - t)
        print(f"exec /bin/true through the SDK: {ms(execs)}")
        # Streaming: the guest prints its clock (the host's), the client
        # notes when each line arrives.
        lags = []
        script = "import time,sys\nfor i in range(30):\n    print(time.time_ns(), flush=True); time.sleep(0.02)\n"

        def got(chunk):
            now = time.time_ns()
            for line in chunk.split():
                lags.append((now - int(line)) / 1e9)

        sb.exec(["python3", "-c", script], on_stdout=got, check=True)
        print(f"streaming latency (guest print to SDK callback): {ms(lags[5:])}")
        sb.close()

        t = time.perf_counter()
        boxes = [Sandbox.create(f"many{i}", client=c) for i in range(N)]
        took = time.perf_counter() - t
        for b in boxes:
            b.exec("sleep 0", check=True)
        pids = [p for b in boxes for p in tree(b.refresh()["pid"])]
        total = sum(pss_kib(p) for p in pids)
        print(f"{N} sandboxes alive: created in {took:.1f} s ({took / N * 1e3:.0f} ms each), "
              f"{len(pids) / N:.1f} host processes and {total / N / 1024:.1f} MiB PSS each "
              f"({total / 1024:.0f} MiB in all)")
        avail = [int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemAvailable")][0]
        print(f"host MemAvailable with them alive: {avail / 1024 / 1024:.1f} GiB")
        t = time.perf_counter()
        for b in boxes:
            b.close()
        print(f"{N} sandboxes removed in {time.perf_counter() - t:.1f} s")
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=120)
        subprocess.run(["rm", "-rf", root])


if __name__ == "__main__":
    main()
