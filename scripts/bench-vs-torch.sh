#!/bin/sh
# Side-by-side CPU latency of rulebook's runtime and PyTorch on the shared
# models, same thread count, one run (for BENCHMARKS.md). Needs Debian's
# python3-torch and python3-torchvision; the project itself never does.
#   scripts/bench-vs-torch.sh [THREADS] [REPEAT]
set -eu
threads=${1:-2}
repeat=${2:-20}
models=${RULEBOOK_SHARED:-../shared}/models
go build -o /tmp/rulebook-bench ./cmd/rulebook
for m in resnet50 inception_v3 squeezenet1_1 bert_base; do
	ours=$(/tmp/rulebook-bench run "$models/$m.onnx" --threads "$threads" --repeat "$repeat" 2>/dev/null | sed -n 's/^median latency \([^ ]*\) .*/\1/p')
	torch=$(/usr/bin/python3 scripts/torch_latency.py --threads "$threads" --repeat "$repeat" --only "$m" | cut -f2)
	printf '%s\trulebook %s\tpytorch %s\n' "$m" "$ours" "$torch"
done
