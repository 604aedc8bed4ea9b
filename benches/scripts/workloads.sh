#!/bin/sh
# Real work, natively, in ferrovisor (each platform) and in gVisor (systrap)
# when its runsc has it: best wall time of N runs each, and the ratios to
# native and to gVisor. Usage: benches/scripts/workloads.sh [RUNS]
#   FERROVISOR_BIN  the binary (default: target/release/ferrovisor)
#   RUNSC           gVisor's runsc (default: runsc on the PATH; empty: none)
#   PLATFORMS       default: "seccomp seccomp-yield seccomp-spin ptrace"
set -eu
runs=${1:-3}
bin=${FERROVISOR_BIN:-target/release/ferrovisor}
runsc=${RUNSC-runsc}
platforms=${PLATFORMS:-seccomp seccomp-yield seccomp-spin ptrace}
[ -x "$bin" ] || { echo "no $bin: cargo build --release -p runsc-shim" >&2; exit 1; }
if [ -n "$runsc" ] && ! "$runsc" --network=none --platform=systrap do /bin/true >/dev/null 2>&1; then
	echo "note: $runsc cannot run systrap; no gVisor column" >&2
	runsc=
fi
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs"

# best MODE CMD...: the least wall time of $runs runs, in ms.
best() {
	mode=$1; shift
	b=
	i=0
	while [ $i -lt "$runs" ]; do
		s=$(date +%s%N)
		case $mode in
		native) "$@" >/dev/null 2>&1 ;;
		gvisor) "$runsc" --network=none --platform=systrap do "$@" >/dev/null 2>&1 ;;
		*) "$bin" do --platform "$mode" -- "$@" >/dev/null 2>&1 ;;
		esac
		e=$(date +%s%N)
		t=$(( (e - s) / 1000000 ))
		if [ -z "$b" ] || [ "$t" -lt "$b" ]; then b=$t; fi
		i=$((i + 1))
	done
	echo "$b"
}

work() {
	name=$1; shift
	n=$(best native "$@")
	g=
	[ -n "$runsc" ] && g=$(best gvisor "$@")
	line="$name: native ${n} ms"
	for p in $platforms; do
		t=$(best "$p" "$@")
		line="$line, $p ${t} ms ($(awk "BEGIN{printf \"%.1fx\", $t/($n?$n:1)}")"
		[ -n "$g" ] && line="$line, $(awk "BEGIN{printf \"%.2f\", $t/($g?$g:1)}") of gVisor's"
		line="$line)"
	done
	[ -n "$g" ] && line="$line, gvisor ${g} ms ($(awk "BEGIN{printf \"%.1fx\", $g/($n?$n:1)}"))"
	echo "$line"
}

work "true" /bin/true
work "sh: 200 fork+exec" /bin/sh -c 'i=0; while [ $i -lt 200 ]; do /bin/true; i=$((i+1)); done'
work "python3 -c pass" python3 -c pass
work "find /usr/lib" find /usr/lib -type f
work "tar czf /usr/share/doc" tar czf - /usr/share/doc
