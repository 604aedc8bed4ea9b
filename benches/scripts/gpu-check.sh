#!/bin/bash
# The GPU machine's check of issue 16 (docs/gpu.md), a few minutes in all:
# host facts, ferrovisor itself, then nvidia-smi, a CUDA driver-API program
# and PyTorch, each natively and in `ferrovisor do --gpus all`, side by side.
# Run from the repository root: benches/scripts/gpu-check.sh [FERROVISOR]
set -u
FV=${1:-target/release/ferrovisor}
DIR=$(cd "$(dirname "$0")/gpu" && pwd)
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
step() { echo; echo "== $*"; }
step host; uname -r; grep -m1 'model name' /proc/cpuinfo; head -1 /proc/driver/nvidia/version 2>&1
ls -l /dev/nvidia* 2>&1
step "ferrovisor itself"
"$FV" do /bin/true && echo "do /bin/true: ok" || echo "do /bin/true: FAILED ($?)"
"$FV" nvproxy check-host
if ! "$FV" do --help 2>/dev/null | grep -q -- '--gpus'; then
    echo "this ferrovisor has no 'do --gpus' yet: native runs only"
    NO_GPU_FLAG=1
fi
run_both() { # NAME CMD...: natively, then in the sandbox; outputs compared
    local name=$1; shift
    step "$name (native)"; "$@" > "$OUT/$name.native" 2>&1; echo "exit $?"; cat "$OUT/$name.native"
    [ -n "${NO_GPU_FLAG:-}" ] && return
    step "$name (ferrovisor)"; "$FV" do --gpus all --nvproxy-log "$OUT/$name.nvlog" -- "$@" \
        > "$OUT/$name.sandbox" 2>&1; echo "exit $?"; cat "$OUT/$name.sandbox"
    grep -c '^refused' "$OUT/$name.nvlog" 2>/dev/null | sed 's/^/refused commands: /'
    grep '^refused' "$OUT/$name.nvlog" 2>/dev/null | sort | uniq -c | sort -rn | head -20
}
run_both nvidia-smi nvidia-smi -L
if command -v nvcc >/dev/null; then
    nvcc -o "$OUT/cuda_check" "$DIR/cuda_check.c" -lcuda && run_both cuda "$OUT/cuda_check"
else
    gcc -o "$OUT/cuda_check" "$DIR/cuda_check.c" -I/usr/local/cuda/include -lcuda && run_both cuda "$OUT/cuda_check"
fi
run_both torch timeout 300 python3 "$DIR/torch_check.py"
step summary
for n in nvidia-smi cuda torch; do
    [ -f "$OUT/$n.sandbox" ] || continue
    if diff <(grep -v -E 'tflops|gbps' "$OUT/$n.native") <(grep -v -E 'tflops|gbps' "$OUT/$n.sandbox") >/dev/null; then
        echo "$n: same output"; else echo "$n: OUTPUT DIFFERS"; fi
done
if [ -f "$OUT/torch.sandbox" ]; then
    for k in matmul_tflops h2d_gbps; do
        a=$(awk -v k=$k '$1==k{print $2}' "$OUT/torch.native"); b=$(awk -v k=$k '$1==k{print $2}' "$OUT/torch.sandbox")
        [ -n "$a" ] && [ -n "$b" ] && echo "$k native $a sandbox $b ratio $(echo "scale=3; $b/$a" | bc)"
    done
fi
