#!/usr/bin/env python3
"""Checkpoint and restore figures, in one run: a Python that imported json,
re, asyncio, sqlite3, email and http.client and waits on stdin is saved
(`do --save`), then restored N times (`do --restore`). Prints the save time
and image size, the restore time in the Sentry and to the first byte of
output after input, and beside them a fresh start of the same imports
natively and in the sandbox; then the time `sandbox fork` takes to a copy
that runs a command, and the host memory (PSS) each fork adds; and the
same for `sandbox create --from` one snapshot, whose copies share its pages.

Usage (as root): benches/scripts/checkpoint.py [FERROVISOR] [N]
"""

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "target", "release", "ferrovisor")
N = int(sys.argv[2]) if len(sys.argv) > 2 else 10

IMPORTS = "import json, re, asyncio, sqlite3, email, http.client, sys\n"
READY = IMPORTS + (
    "try:\n"
    "    open('/proc/ferrovisor/checkpoint', 'w').write('save')\n"
    "except FileNotFoundError:\n"
    "    pass\n"
    "print(sys.stdin.readline().strip(), flush=True)\n"
)


def cpu():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"


def first_output(argv):
    """Seconds from start to the first line of output after input."""
    t = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdin.write(b"go\n")
    p.stdin.flush()
    line = p.stdout.readline()
    took = time.perf_counter() - t
    p.wait()
    assert line == b"go\n", (argv, line)
    return took


def median_ms(xs):
    return statistics.median(xs) * 1e3


def main():
    work = tempfile.mkdtemp(prefix="ferrovisor-ckpt-", dir="/var/tmp")
    script = os.path.join(work, "ready.py")
    open(script, "w").write(READY)
    images = os.path.join(work, "img")
    log = os.path.join(work, "save.log")
    subprocess.run([BIN, "do", "--debug-log", log, "--save", images, "--", "python3", script],
                   input=b"x\n", check=True, stdout=subprocess.DEVNULL)
    saved = re.search(r"checkpoint saved: (\d+) bytes in ([\d.]+) ms", open(log).read())
    native = [first_output(["python3", script]) for _ in range(N)]
    fresh = [first_output([BIN, "do", "--", "python3", script]) for _ in range(N)]
    restored = [first_output([BIN, "do", "--restore", images]) for _ in range(N)]
    inside = []
    for i in range(N):
        rlog = os.path.join(work, f"restore{i}.log")
        subprocess.run([BIN, "do", "--debug-log", rlog, "--restore", images], input=b"x\n",
                       check=True, stdout=subprocess.DEVNULL)
        m = re.search(r"sandbox restored from \d+ bytes in ([\d.]+) ms", open(rlog).read())
        inside.append(float(m.group(1)))
    print(f"CPU: {cpu()}; medians of {N} runs")
    print(f"checkpoint: {saved.group(2)} ms, image {int(saved.group(1)) / 1e6:.1f} MB")
    print(f"restore in the Sentry (memory and files in place): {statistics.median(inside):.2f} ms")
    print(f"restore to first output after input: {median_ms(restored):.1f} ms")
    print(f"fresh start, same imports: native {median_ms(native):.1f} ms, "
          f"sandbox {median_ms(fresh):.1f} ms")
    forks(work)
    subprocess.run(["rm", "-rf", work])


def pss_kb(pids):
    """Proportional set size of these host processes and their children."""
    total = 0
    seen = set()
    todo = list(pids)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            for line in open(f"/proc/{pid}/smaps_rollup"):
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
            for t in os.listdir(f"/proc/{pid}/task"):
                kids = open(f"/proc/{pid}/task/{t}/children").read().split()
                todo.extend(int(k) for k in kids)
        except OSError:
            pass
    return total


def forks(work):
    """`sandbox fork` of a sandbox whose Python imported the modules: time to
    a copy that answers an exec, and the PSS each copy adds."""
    root = os.path.join(work, "sandboxes")
    sb = [BIN, "--root", root, "sandbox"]
    subprocess.run(sb + ["create", "base"], check=True, stdout=subprocess.DEVNULL)
    wait = IMPORTS.strip() + "; import time; print('ready', flush=True); time.sleep(100000)"
    subprocess.run(sb + ["exec", "base", "--", "sh", "-c",
                         f"python3 -c \"{wait}\" < /dev/null > /tmp/ready 2>&1 &"], check=True)
    while subprocess.run(sb + ["exec", "base", "--", "cat", "/tmp/ready"],
                         capture_output=True).stdout != b"ready\n":
        time.sleep(0.05)
    took = []
    for i in range(N):
        t = time.perf_counter()
        subprocess.run(sb + ["fork", "base", f"f{i}"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(sb + ["exec", f"f{i}", "--", "true"], check=True)
        took.append(time.perf_counter() - t)
    meta = lambda n: __import__("json").load(open(os.path.join(root, ".sandboxes", n, "sandbox.json")))
    base = pss_kb([meta("base")["pid"]])
    each = [pss_kb([meta(f"f{i}")["pid"]]) for i in range(N)]
    print(f"sandbox fork to a copy that ran an exec: {median_ms(took):.1f} ms; "
          f"host memory (PSS) {base / 1024:.1f} MiB the original, "
          f"{statistics.median(each) / 1024:.1f} MiB each fork")
    snap = os.path.join(work, "snap")
    subprocess.run(sb + ["snapshot", "base", snap], check=True, stdout=subprocess.DEVNULL)
    took = []
    for i in range(N):
        t = time.perf_counter()
        subprocess.run(sb + ["create", f"s{i}", "--from", snap], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(sb + ["exec", f"s{i}", "--", "true"], check=True)
        took.append(time.perf_counter() - t)
    each = [pss_kb([meta(f"s{i}")["pid"]]) for i in range(N)]
    print(f"sandbox create --from one snapshot, to a copy that ran an exec: "
          f"{median_ms(took):.1f} ms; host memory (PSS) {statistics.median(each) / 1024:.1f} MiB each")
    names = [f"f{i}" for i in range(N)] + [f"s{i}" for i in range(N)]
    subprocess.run(sb + ["rm", "base"] + names, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
