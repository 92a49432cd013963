#!/usr/bin/env bash
# gpu_check.sh STAGE...: issue 29's measurements on a GPU machine, in one call.
#
# Stages, run in the order given:
#   export     torchvision classifiers (scripts/export_torchvision.py) at batch 1,
#              and resnet50, inception_v3 and bert_base (--bert) at batch 32,
#              into gpu-work/ (kept while the machine stays warm; every stage
#              exports what it needs and is missing)
#   tests      cuda.test; runtime.test -test.run CUDA (the emulator's tests
#              skipped), then TestCUDANodeConformance on its own
#   latency    ours (rulebook run --backend cuda) against PyTorch eager and CUDA
#              graph (scripts/torch_gpu_latency.py) at batch 1, fp32, two
#              rounds alternating which goes first; at batch 32 fp32, tf32 and
#              bf16 against PyTorch eager at the same precision
#   optimizer  rulebook optimize --device cuda --cost measured on nine models,
#              then three rounds alternating the original and the rewritten
#              model under rulebook run --backend cuda
# Everything goes under $OUT (default ./gpu-out): gpu_check.log (all output),
# summary.md (the tables, appended as each row is measured, so a cut-off run
# keeps what it measured), logs/ (each command's output), torch-*.jsonl
# (scripts/torch_gpu_latency.py's lines), notes.md and opt-notes.md.
#
# Before: scripts/gpu_prep.sh here (binaries, models and node tests into
# gpu-carry/, about 36 MiB). Then, with the device tool (15 minutes of device
# time in all, the machine's start included; make the second call at once,
# while the machine is warm and gpu-work/ still holds the exports):
#
#   run  command: "GPU_CHECK_SECONDS=360 scripts/gpu_check.sh export latency"
#        carry: ["gpu-carry"]   timeout_s: 420
#   run  command: "GPU_CHECK_SECONDS=360 scripts/gpu_check.sh tests optimizer"
#        carry: ["gpu-carry"]   timeout_s: 420
#
# The first call costs the machine's start (1-2 min) besides its ≤ 6.5 min.
# If status says the machine is no longer warm before the second, that
# call starts a fresh one (and re-exports what its stages need): set its
# GPU_CHECK_SECONDS to budget_left_s - 180 and timeout_s 60 above it.
#
# Each stage also stops at its own cap (GPU_CHECK_<STAGE>_SECONDS: export 120,
# tests 170, latency 250, optimizer 240) and all of them by
# GPU_CHECK_SECONDS (default 360) after the script starts, cutting each
# command short with `timeout` and noting what was not reached.
#
# Dry run, without a GPU (--backend cpu, PyTorch on the CPU, squeezenet1_1
# only, batch 2 for the large-batch rows, tiny repeats):
#   GPU_CHECK_DRY=1 scripts/gpu_check.sh export latency optimizer
#
# Other settings: GPU_CHECK_PYTHON (default /opt/torch/.venv/bin/python3 if
# present, else python3; its folder goes first on PATH so that the CUDA
# backend finds the NVIDIA wheels beside it), GPU_CHECK_REPEAT (50),
# GPU_CHECK_RULES (optimizer/testdata/rules-3ops-1x1.json),
# GPU_CHECK_OPT_SEARCH (search --timeout, 10s), GPU_CHECK_OPT_ROUNDS (3),
# GPU_CHECK_MODELS and GPU_CHECK_OPT_MODELS (the batch-1 and optimizer
# models, space-separated, in order). A row whose model is marked (shared)
# ran ../shared/models' weight-free file, random weights, the export missing.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu-out}
CARRY=$ROOT/gpu-carry
WORK=$ROOT/gpu-work
RB=$CARRY/bin/rulebook
DRY=${GPU_CHECK_DRY:-0}
TOTAL=${GPU_CHECK_SECONDS:-360}
RULES=${GPU_CHECK_RULES:-optimizer/testdata/rules-3ops-1x1.json}
OPT_SEARCH=${GPU_CHECK_OPT_SEARCH:-10s}
SUMMARY=$OUT/summary.md
mkdir -p "$OUT/logs" "$WORK"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1

if [[ $DRY == 1 ]]; then
	BACKEND=cpu TORCH_DEVICE=cpu BIG=2 REPEAT=${GPU_CHECK_REPEAT:-3} REPEAT_BIG=2 OPT_ROUNDS=2
	B1_MODELS=(squeezenet1_1) BIG_MODELS=(squeezenet1_1) OPT_MODELS=(squeezenet1_1) PRECISIONS=(fp32)
	TESTED_EXPORTS=(squeezenet1_1) EXTRA=(--threads 2) OPT_COST=(--device cpu --cost analytic)
else
	BACKEND=cuda TORCH_DEVICE=cuda BIG=32 REPEAT=${GPU_CHECK_REPEAT:-50} REPEAT_BIG=20 OPT_ROUNDS=${GPU_CHECK_OPT_ROUNDS:-3}
	B1_MODELS=(resnet50 inception_v3 densenet121 mobilenet_v2 vit_b_16 convnext_tiny shufflenet_v2_x1_0
		swin_t squeezenet1_1 resnext50_32x4d efficientnet_b0 regnet_y_400mf bert_base)
	BIG_MODELS=(resnet50 inception_v3 bert_base) PRECISIONS=(fp32 tf32 bf16)
	# Where a rule may apply first (BENCHMARKS: inception_v3's pool rule), densenet121's slow search last.
	OPT_MODELS=(inception_v3 resnet50 bert_base squeezenet1_1 mobilenet_v2 resnext50_32x4d efficientnet_b0
		regnet_y_400mf densenet121)
	# runtime/cuda_test.go's cudaPlannedModels that are torchvision exports.
	TESTED_EXPORTS=(shufflenet_v2_x1_0 convnext_tiny swin_t vit_b_16)
	EXTRA=() OPT_COST=(--device cuda --cost measured)
fi
if [[ -n ${GPU_CHECK_MODELS:-} ]]; then read -ra B1_MODELS <<<"$GPU_CHECK_MODELS"; fi
if [[ -n ${GPU_CHECK_OPT_MODELS:-} ]]; then read -ra OPT_MODELS <<<"$GPU_CHECK_OPT_MODELS"; fi
EXPORT1=$WORK/export-b1
EXPORT_BIG=$WORK/export-b$BIG

# ---- time ----

declare -A STAGE_CAP=([export]=120 [tests]=170 [latency]=250 [optimizer]=240)
STAGE_END=0

start_stage() {
	local var="GPU_CHECK_${1^^}_SECONDS"
	local cap=${!var:-${STAGE_CAP[$1]}}
	STAGE_END=$((SECONDS + cap < TOTAL ? SECONDS + cap : TOTAL))
	echo "== stage $1 ($((STAGE_END - SECONDS)) s left, $SECONDS s in)"
	printf '\n## %s\n\n' "$1" >>"$SUMMARY"
}

# slot WANT prints the seconds a command may take, WANT at most, leaving 5 s
# of the stage; it fails under 10 s (end_stage then says so).
slot() {
	local left=$((STAGE_END - SECONDS - 5))
	if ((left < 10)); then
		echo "out of time for the next command ($SECONDS s in)" >&2
		touch "$OUT/.out-of-time"
		return 1
	fi
	echo $((left < $1 ? left : $1))
}

end_stage() {
	if [[ -f $OUT/.out-of-time ]]; then
		rm -f "$OUT/.out-of-time"
		printf '\nThe stage ran out of time (%s s in): a row with — or a missing row was not reached.\n' "$SECONDS" >>"$SUMMARY"
	fi
	echo "== stage $1 ended ($SECONDS s in)"
}

# run_for SECS LOG CMD... runs CMD under timeout, its output to LOG and the
# main log; it returns CMD's status (124: cut off).
run_for() {
	local secs=$1 log=$2
	shift 2
	echo "\$ $* (≤ ${secs} s)"
	local rc=0
	timeout -k 5 "$secs" "$@" >"$log" 2>&1 || rc=$?
	tail -n 40 "$log"
	if ((rc == 124)); then echo "cut off after $secs s"; fi
	return "$rc"
}

# ---- parsing ----

# go_ms DURATION converts a Go duration (850µs, 2.58ms, 1.2s) to ms.
go_ms() {
	awk -v d="$1" 'BEGIN {
		if (d ~ /µs$/) { sub(/µs$/, "", d); printf "%.3f", d / 1000 }
		else if (d ~ /ns$/) { sub(/ns$/, "", d); printf "%.4f", d / 1e6 }
		else if (d ~ /ms$/) { sub(/ms$/, "", d); printf "%.3f", d }
		else if (d ~ /s$/) { sub(/s$/, "", d); printf "%.1f", d * 1000 }
		else printf "?" }'
}

# median_of LOG prints the median `rulebook run` reported, in ms, or "—".
median_of() {
	local d
	d=$(sed -n 's/^median latency \([^ ]*\) over.*/\1/p' "$1" | tail -1)
	if [[ -n $d ]]; then go_ms "$d"; else echo "—"; fi
}

# cpu_nodes_of LOG prints N of "note: N nodes run on the CPU", 0 without one.
cpu_nodes_of() {
	local n
	n=$(sed -n 's/^note: \([0-9]*\) nodes run on the CPU.*/\1/p' "$1" | head -1)
	echo "${n:-0}"
}

# json_field LINE KEY prints a scalar field of a torch_gpu_latency.py line.
json_field() {
	sed -n "s/.*\"$2\": \"\{0,1\}\([^,\"}]*\).*/\1/p" <<<"$1"
}

# torch_ms JSONL MODEL BATCH PRECISION MODE prints that row's median, or "—".
torch_ms() {
	local line
	line=$(grep -F "\"model\": \"$2\", \"batch\": $3, \"precision\": \"$4\", \"mode\": \"$5\"" "$1" 2>/dev/null | grep median_ms | tail -1 || true)
	local ms
	ms=$(json_field "$line" median_ms)
	if [[ -n $ms ]]; then printf '%.3f\n' "$ms"; else echo "—"; fi
}

# ratio A B prints A/B to two decimals, or "—".
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "—" }'
}

# ---- models ----

# model_path NAME BATCH prints the ONNX file for NAME at BATCH, "" if none:
# batch 1 prefers the torchvision export (PyTorch's own graph), falls back to
# the shared models (weight-free, random weights); bert_base at batch 1 is
# the shared one.
model_path() {
	local name=$1 batch=$2
	if ((batch != 1)); then
		[[ -f $EXPORT_BIG/$name/model.onnx ]] && echo "$EXPORT_BIG/$name/model.onnx"
		return 0
	fi
	if [[ $name != bert_base && -f $EXPORT1/$name/model.onnx ]]; then
		echo "$EXPORT1/$name/model.onnx"
	elif [[ -f $CARRY/shared/models/$name.onnx ]]; then
		echo "$CARRY/shared/models/$name.onnx"
	fi
}

# origin NAME prints " (shared)" when batch 1 runs the shared model of a
# torchvision classifier, its export missing.
origin() {
	local path
	path=$(model_path "$1" 1)
	if [[ $1 != bert_base && $path == "$CARRY"/shared/* ]]; then echo " (shared)"; fi
}

# ensure_exports BATCH NAME... exports those not yet exported at BATCH.
ensure_exports() {
	local batch=$1 dir=$WORK/export-b$1
	shift
	local missing=() bert=() n
	for n in "$@"; do
		if [[ ($n == bert_base && $batch == 1) || -f $dir/$n/model.onnx || " ${missing[*]} " == *" $n "* ]]; then
			continue
		fi
		if [[ $n == bert_base ]]; then bert=(--bert); else missing+=("$n"); fi
	done
	((${#missing[@]} + ${#bert[@]} > 0)) || return 0
	local secs log=$OUT/logs/export-b$batch-$SECONDS.log
	secs=$(slot 600) || return 0
	run_for "$secs" "$log" "$PY" scripts/export_torchvision.py "$dir" "${missing[@]}" "${bert[@]}" --batch "$batch" || true
	{
		echo '```'
		echo "batch $batch:"
		grep -E ': (exported|not exported)' "$log" || echo "(nothing exported: see logs/$(basename "$log"))"
		echo '```'
	} >>"$SUMMARY"
}

# ---- stages ----

stage_export() {
	ensure_exports 1 "${B1_MODELS[@]}" "${OPT_MODELS[@]}" "${TESTED_EXPORTS[@]}"
	ensure_exports "$BIG" "${BIG_MODELS[@]}"
	echo "exports: $(du -sh "$WORK" | cut -f1) in gpu-work/" >>"$SUMMARY"
}

unpack_node_tests() {
	compgen -G "$WORK/onnx-node/node/test_*/model.onnx" >/dev/null && return 0
	mkdir -p "$WORK/onnx-node"
	tar -C "$WORK/onnx-node" -xzf "$CARRY/onnx-node.tar.gz"
}

# summarize_tests NAME LOG RC appends the test binary's counts to the summary.
summarize_tests() {
	local name=$1 log=$2 rc=$3
	local pass fail skip
	pass=$(grep -c '^--- PASS' "$log" || true)
	fail=$(grep -c '^--- FAIL' "$log" || true)
	skip=$(grep -c '^--- SKIP' "$log" || true)
	{
		echo "- **$name**: exit $rc; top-level tests: $pass passed, $fail failed, $skip skipped"
		grep -hE 'node tests passed|: GPU: ' "$log" | head -3 | sed 's/^[[:space:]]*/  - /' || true
		grep -E '^[[:space:]]*--- FAIL' "$log" | head -20 | sed 's/^[[:space:]]*/  - /' || true
		if ((rc == 124)); then echo "  - cut off by the stage's time limit"; fi
	} >>"$SUMMARY"
}

# run_test NAME DIR SECS ARGS... runs gpu-carry/bin/NAME in the package folder DIR.
run_test() {
	local name=$1 dir=$2 want=$3
	shift 3
	local secs rc=0 log=$OUT/logs/$name-$SECONDS.log
	secs=$(slot "$want") || return 0
	(cd "$dir" && run_for "$secs" "$log" "$CARRY/bin/${name%%-*}.test" -test.v -test.timeout "$((secs - 3))s" "$@") || rc=$?
	summarize_tests "$name" "$log" "$rc"
}

stage_tests() {
	unpack_node_tests || echo "- no ONNX node tests: gpu-carry/onnx-node.tar.gz missing or broken" >>"$SUMMARY"
	ensure_exports 1 "${TESTED_EXPORTS[@]}"
	local short=()
	if [[ $DRY == 1 ]]; then short=(-test.short); fi
	export RULEBOOK_SHARED=$CARRY/shared RULEBOOK_ONNX_TESTDATA=$WORK/onnx-node RULEBOOK_TORCHVISION_DIR=$EXPORT1
	run_test cuda runtime/cuda 30 "${short[@]}"
	# The emulator's tests (a C++ compiler's, minutes long) are not the GPU's.
	run_test runtime-models runtime 90 -test.run CUDA -test.skip 'Emulated|PlansTorchvision|NodeConformance' "${short[@]}"
	run_test runtime-conformance runtime 300 -test.run 'TestCUDANodeConformance$' "${short[@]}"
}

# ours NAME BATCH PRECISION TAG runs our runtime; prints "MEDIAN_MS CPU_NODES".
ours() {
	local name=$1 batch=$2 precision=$3 path secs log=$OUT/logs/ours-$1-b$2-$3-$4.log
	path=$(model_path "$name" "$batch")
	if [[ -z $path ]]; then
		echo "— —"
		return 0
	fi
	local prec=()
	[[ $BACKEND == cuda ]] && prec=(--precision "$precision")
	local repeat=$REPEAT
	if ((batch != 1)); then repeat=$REPEAT_BIG; fi
	secs=$(slot 90) || { echo "— —"; return 0; }
	run_for "$secs" "$log" "$RB" run "$path" --backend "$BACKEND" --repeat "$repeat" "${prec[@]}" "${EXTRA[@]}" >&2 || true
	local ms
	ms=$(median_of "$log")
	if [[ $4 == r1 ]]; then notes_of "$log" "$name b$batch $precision"; fi
	if [[ $ms == — ]]; then
		problems_of "$log" "$name b$batch $precision $4"
		echo "— —"
	else
		echo "$ms $(cpu_nodes_of "$log")"
	fi
}

# torch_block BATCH PRECISIONS MODES NAME... times PyTorch in one process,
# appending JSON lines to torch.jsonl.
torch_block() {
	local batch=$1 precisions=$2 modes=$3
	shift 3
	local secs repeat=$REPEAT log=$OUT/logs/torch-b$batch-$SECONDS.log
	if ((batch != 1)); then repeat=$REPEAT_BIG; fi
	secs=$(slot 240) || return 0
	local threads=()
	if [[ $DRY == 1 ]]; then threads=(--threads 2); fi
	run_for "$secs" "$log" "$PY" scripts/torch_gpu_latency.py "$@" --batch "$batch" --precision "$precisions" \
		--mode "$modes" --repeat "$repeat" --device "$TORCH_DEVICE" "${threads[@]}" || true
	grep '^{' "$log" >>"$OUT/torch.jsonl" || true
	problems_of "$log" "PyTorch b$batch"
}

# notes_of LOG LABEL appends a run's notes (fallbacks, cuDNN, graphs) to notes.md.
notes_of() {
	grep '^note:' "$1" | cut -c1-400 | sed "s|^|  - $2: |" >>"$OUT/notes.md" || true
}

# problems_of LOG LABEL [FILE] appends why a command failed (its error lines)
# to FILE, notes.md by default.
problems_of() {
	grep -E '^rulebook: |"error": |is_available\(\) is False|^[A-Za-z]*Error' "$1" | head -3 | cut -c1-300 |
		sed "s|^|  - $2: |" >>"${3:-$OUT/notes.md}" || true
}

latency_batch1() {
	local modes=eager,graph
	if [[ $TORCH_DEVICE == cpu ]]; then modes=eager; fi
	{
		echo "Batch 1, fp32 (TF32 off), median ms: ours $REPEAT runs (rulebook run --backend $BACKEND), PyTorch $REPEAT runs ($TORCH_DEVICE)."
		echo
		echo "| model | round | ours | PyTorch eager | PyTorch graph | ours / eager | ours / graph | nodes on the CPU |"
		echo "|---|---:|---:|---:|---:|---:|---:|---:|"
	} >>"$SUMMARY"
	local round m
	local -A got
	for round in 1 2; do
		got=()
		# Odd rounds: ours first; even rounds: PyTorch first.
		if ((round % 2 == 0)); then torch_block 1 fp32 "$modes" "${B1_MODELS[@]}"; fi
		for m in "${B1_MODELS[@]}"; do
			got[$m]=$(ours "$m" 1 fp32 "r$round")
		done
		if ((round % 2 == 1)); then torch_block 1 fp32 "$modes" "${B1_MODELS[@]}"; fi
		for m in "${B1_MODELS[@]}"; do
			local o cpu e g
			read -r o cpu <<<"${got[$m]}"
			e=$(torch_ms "$OUT/torch.jsonl" "$m" 1 fp32 eager)
			g=$(torch_ms "$OUT/torch.jsonl" "$m" 1 fp32 graph)
			echo "| $m$(origin "$m") | $round | $o | $e | $g | $(ratio "$o" "$e") | $(ratio "$o" "$g") | $cpu |" >>"$SUMMARY"
		done
		# A round's PyTorch rows are read before the next round's are written.
		if [[ -f $OUT/torch.jsonl ]]; then mv "$OUT/torch.jsonl" "$OUT/torch-b1-r$round.jsonl"; fi
	done
}

latency_big() {
	{
		echo
		echo "Batch $BIG, median ms: ours $REPEAT_BIG runs (--precision), PyTorch eager $REPEAT_BIG runs at the same precision."
		echo
		echo "| model | precision | ours | PyTorch eager | ours / eager | nodes on the CPU |"
		echo "|---|---|---:|---:|---:|---:|"
	} >>"$SUMMARY"
	local m p
	local -A got=()
	for m in "${BIG_MODELS[@]}"; do
		for p in "${PRECISIONS[@]}"; do
			got[$m-$p]=$(ours "$m" "$BIG" "$p" r1)
		done
	done
	torch_block "$BIG" "$(IFS=,; echo "${PRECISIONS[*]}")" eager "${BIG_MODELS[@]}"
	for m in "${BIG_MODELS[@]}"; do
		for p in "${PRECISIONS[@]}"; do
			local o cpu e
			read -r o cpu <<<"${got[$m-$p]}"
			e=$(torch_ms "$OUT/torch.jsonl" "$m" "$BIG" "$p" eager)
			echo "| $m | $p | $o | $e | $(ratio "$o" "$e") | $cpu |" >>"$SUMMARY"
		done
	done
	if [[ -f $OUT/torch.jsonl ]]; then mv "$OUT/torch.jsonl" "$OUT/torch-b$BIG.jsonl"; fi
}

stage_latency() {
	ensure_exports 1 "${B1_MODELS[@]}"
	ensure_exports "$BIG" "${BIG_MODELS[@]}"
	: >"$OUT/notes.md"
	latency_batch1
	latency_big
	{
		echo
		echo "Notes of our first-round runs (fallbacks, cuDNN, CUDA graphs) and failures:"
		echo
		if [[ -s $OUT/notes.md ]]; then cat "$OUT/notes.md"; else echo "  - none"; fi
	} >>"$SUMMARY"
}

# verdict RATIOS... says whether the rewritten model is slower or faster
# beyond noise: every round's ratio beyond 1 by more than 5%, or by more than
# the rounds' spread (largest ratio less smallest) when that is wider.
verdict() {
	printf '%s\n' "$@" | awk '
		$1 != "—" { n++; r[n] = $1; if (n == 1 || $1 < lo) lo = $1; if (n == 1 || $1 > hi) hi = $1 }
		END {
			if (n < 2) { print "too few rounds"; exit }
			noise = hi - lo; if (noise < 0.05) noise = 0.05
			if (lo > 1 + noise) print "slower beyond noise"
			else if (hi < 1 - noise) print "faster beyond noise"
			else print "within noise" }'
}

optimize_one() {
	local m=$1 path secs log=$OUT/logs/optimize-$1.log out=$WORK/opt/$1.opt.onnx
	path=$(model_path "$m" 1)
	if [[ -z $path ]]; then
		echo "| $m | no model | | | | |" >>"$SUMMARY"
		return 0
	fi
	mkdir -p "$WORK/opt"
	secs=$(slot 90) || return 1
	if ! run_for "$secs" "$log" "$RB" optimize "$path" --rules "$RULES" "${OPT_COST[@]}" --timeout "$OPT_SEARCH" \
		--no-progress -o "$out" "${EXTRA[@]}"; then
		echo "| $m | optimize failed (logs/$(basename "$log")) | | | | |" >>"$SUMMARY"
		problems_of "$log" "$m" "$OUT/opt-notes.md"
		return 0
	fi
	local applied ratios=() round first second o r
	applied=$(grep -c '"rule":' "${out%.onnx}.json" || true)
	sed -n '/^rules /,/^search:/p' "$log" | head -3 | sed "s|^|  - $m: |" >>"$OUT/opt-notes.md"
	for ((round = 1; round <= OPT_ROUNDS; round++)); do
		# Alternate which of the two goes first.
		first=$path second=$out
		if ((round % 2 == 0)); then first=$out second=$path; fi
		local a b
		a=$(ours_file "$first" "$m-r$round-a") || break
		b=$(ours_file "$second" "$m-r$round-b") || break
		if ((round % 2 == 0)); then o=$b r=$a; else o=$a r=$b; fi
		ratios+=("$(ratio "$r" "$o")")
		echo "  $m round $round: original $o ms, rewritten $r ms"
	done
	echo "| $m | $applied | ${ratios[*]:-—} | $(verdict "${ratios[@]}") | ${path#"$ROOT"/} | $(sed -n 's/^search: //p' "$log" | cut -c1-60) |" >>"$SUMMARY"
}

# ours_file PATH TAG prints the median of one `rulebook run` of PATH.
ours_file() {
	local secs log=$OUT/logs/run-$2.log
	secs=$(slot 60) || return 1
	run_for "$secs" "$log" "$RB" run "$1" --backend "$BACKEND" --repeat "$REPEAT" "${EXTRA[@]}" >&2 || true
	median_of "$log"
}

stage_optimizer() {
	ensure_exports 1 "${OPT_MODELS[@]}"
	: >"$OUT/opt-notes.md"
	{
		echo "rulebook optimize ${OPT_COST[*]} --rules $RULES --timeout $OPT_SEARCH; then $OPT_ROUNDS rounds of"
		echo "rulebook run --backend $BACKEND --repeat $REPEAT, original and rewritten alternating which goes first."
		echo "Ratio: rewritten / original median, per round."
		echo
		echo "| model | rules applied | ratio per round | verdict | model file | search |"
		echo "|---|---:|---|---|---|---|"
	} >>"$SUMMARY"
	local m
	for m in "${OPT_MODELS[@]}"; do
		optimize_one "$m" || break
	done
	{
		echo
		echo "Costs (optimize's own lines) and failures:"
		echo
		cat "$OUT/opt-notes.md"
	} >>"$SUMMARY"
}

# ---- main ----

pick_python() {
	PY=${GPU_CHECK_PYTHON:-}
	if [[ -z $PY ]]; then
		if [[ -x /opt/torch/.venv/bin/python3 ]]; then PY=/opt/torch/.venv/bin/python3; else PY=$(command -v python3); fi
	fi
	PATH=$(dirname "$PY"):$PATH
	export PATH
}

preamble() {
	{
		echo "# gpu_check.sh $* ($(date -u '+%Y-%m-%d %H:%M UTC'))"
		echo
		echo "- commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'); dry run: $DRY; backend $BACKEND"
		local gpu
		gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || true)
		echo "- GPU: ${gpu:-none (nvidia-smi names none)}"
		echo "- python: $PY, $("$PY" -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__, "cuda", torch.cuda.is_available())' 2>&1 | tail -1)"
		echo "- host: $(nproc) cores; $("$RB" --version 2>&1 | head -1)"
	} >>"$SUMMARY"
}

main() {
	(($# > 0)) || { sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2; }
	[[ -x $RB ]] || { echo "no $RB: run scripts/gpu_prep.sh first and carry gpu-carry" >&2; exit 1; }
	pick_python
	preamble "$@"
	local stage
	for stage in "$@"; do
		case $stage in
		export | tests | latency | optimizer) ;;
		*) echo "unknown stage $stage (export, tests, latency, optimizer)" >&2; exit 2 ;;
		esac
		if ((SECONDS >= TOTAL - 15)); then
			printf '\n## %s\n\nnot run: GPU_CHECK_SECONDS=%s spent\n' "$stage" "$TOTAL" >>"$SUMMARY"
			continue
		fi
		start_stage "$stage"
		# A stage that fails midway must not cost the stages after it.
		"stage_$stage" || printf '\nstage %s stopped with status %s (see gpu_check.log)\n' "$stage" "$?" >>"$SUMMARY"
		end_stage "$stage"
	done
	echo "== done in $SECONDS s; summary: $SUMMARY"
}

main "$@"
