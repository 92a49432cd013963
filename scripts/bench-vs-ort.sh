#!/bin/sh
# Side-by-side CPU latency of rulebook's runtime and ONNX Runtime on the
# shared models: same ONNX file, same generated weights (embedded for ORT by
# scripts/embedweights), same thread count, batch 1, each in its own
# process (in one process, one runtime's spinning threads would share the
# cores the other is timed on). They alternate for ROUNDS rounds of REPEAT
# runs, and each prints the median of its rounds' medians, in ms, and the
# ratio ours/ORT (for BENCHMARKS.md). With BASELINE=/path/to/rulebook an
# older build joins the rotation, for before/after figures. Needs
# python3's onnxruntime; the project itself never does.
#   [BASELINE=bin] scripts/bench-vs-ort.sh [THREADS] [REPEAT] [ROUNDS] [MODEL...]
set -eu
threads=${1:-2}
repeat=${2:-10}
rounds=${3:-5}
shift 3 2>/dev/null || shift $#
models=${RULEBOOK_SHARED:-../shared}/models
tmp=${TMPDIR:-/tmp}/rulebook-ort
mkdir -p "$tmp"
go build -o "$tmp/rulebook" ./cmd/rulebook
median() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
ours() { "$1" run "$models/$2.onnx" --threads "$threads" --repeat "$repeat" 2>/dev/null | sed -n 's/^median latency \([0-9.]*\)ms.*/\1/p'; }
for m in ${*:-squeezenet1_1 resnet50 inception_v3 bert_base}; do
	[ -f "$tmp/$m.onnx" ] || go run ./scripts/embedweights "$models/$m.onnx" "$tmp/$m.onnx"
	: >"$tmp/ours" && : >"$tmp/ort" && : >"$tmp/base"
	i=0
	while [ $i -lt "$rounds" ]; do
		[ -z "${BASELINE:-}" ] || ours "$BASELINE" "$m" >>"$tmp/base"
		ours "$tmp/rulebook" "$m" >>"$tmp/ours"
		python3 scripts/ort_latency.py "$tmp/$m.onnx" --threads "$threads" --repeat "$repeat" >>"$tmp/ort"
		i=$((i + 1))
	done
	ours=$(median <"$tmp/ours")
	ort=$(median <"$tmp/ort")
	printf '%s\tours %s ms\tort %s ms\tratio %s' "$m" "$ours" "$ort" "$(echo "$ours $ort" | awk '{printf "%.2f", $1/$2}')"
	if [ -n "${BASELINE:-}" ]; then
		base=$(median <"$tmp/base")
		printf '\tbaseline %s ms\tratio %s' "$base" "$(echo "$base $ort" | awk '{printf "%.2f", $1/$2}')"
	fi
	printf '\n'
done
