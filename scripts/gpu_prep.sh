#!/usr/bin/env bash
# gpu_prep.sh: fill gpu-carry/ for scripts/gpu_check.sh (issue 29).
#
#     scripts/gpu_prep.sh
#
# Runs here, without a GPU: the device machine has no Go toolchain, no
# ../shared and no libonnx-testdata, and only the repository's working tree
# travels to it (64 MiB with the ignored paths a run carries). So this
# builds stripped linux/amd64 binaries into gpu-carry/bin/ (rulebook,
# runtime.test, cuda.test), copies the shared models into
# gpu-carry/shared/models/, packs ONNX's node tests into
# gpu-carry/onnx-node.tar.gz (gpu_check.sh unpacks them), makes git ignore
# gpu-carry/, gpu-work/ and gpu-out/ (.git/info/exclude), and prints the
# size the run will carry. Then call the device tool's run with carry
# ["gpu-carry"] (scripts/gpu_check.sh's header gives the calls).
#
# Environment: RULEBOOK_SHARED (default ../shared), RULEBOOK_ONNX_TESTDATA
# (default: Debian's libonnx-testdata directories, as internal/testfiles).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CARRY=$ROOT/gpu-carry
SHARED=${RULEBOOK_SHARED:-$ROOT/../shared}
LIMIT_MIB=60 # the device tool carries 64 MiB at most

build_binaries() {
	mkdir -p "$CARRY/bin"
	local env=(GOOS=linux GOARCH=amd64)
	echo "building rulebook, runtime.test, cuda.test (linux/amd64, stripped)"
	(cd "$ROOT" &&
		env "${env[@]}" go build -ldflags='-s -w' -o "$CARRY/bin/rulebook" ./cmd/rulebook &&
		env "${env[@]}" go test -c -ldflags='-s -w' -o "$CARRY/bin/runtime.test" ./runtime &&
		env "${env[@]}" go test -c -ldflags='-s -w' -o "$CARRY/bin/cuda.test" ./runtime/cuda)
}

copy_models() {
	[[ -d $SHARED/models ]] || { echo "no $SHARED/models: set RULEBOOK_SHARED" >&2; exit 1; }
	rm -rf "$CARRY/shared"
	mkdir -p "$CARRY/shared"
	cp -r "$SHARED/models" "$CARRY/shared/models"
}

# node_tests_dir prints the folder of ONNX's node/test_* cases.
node_tests_dir() {
	local d
	for d in ${RULEBOOK_ONNX_TESTDATA:+"$RULEBOOK_ONNX_TESTDATA" "$RULEBOOK_ONNX_TESTDATA/node" "$RULEBOOK_ONNX_TESTDATA/data/node"} \
		/usr/share/libonnx-testdata/data/node /usr/share/onnx/testdata/node \
		/usr/share/onnx/backend/test/data/node /usr/local/share/libonnx-testdata/data/node; do
		if compgen -G "$d/test_*/model.onnx" >/dev/null; then
			echo "$d"
			return
		fi
	done
	echo "no ONNX node tests found: apt-get install libonnx-testdata or set RULEBOOK_ONNX_TESTDATA" >&2
	exit 1
}

pack_node_tests() {
	local dir
	dir=$(node_tests_dir)
	# Packed as node/test_*/…: gzip takes the 27 MB of .pb files to about 4 MB.
	tar -C "$(dirname "$dir")" -czf "$CARRY/onnx-node.tar.gz" --transform "s|^$(basename "$dir")|node|" "$(basename "$dir")"
	echo "node tests from $dir ($(ls -d "$dir"/test_* | wc -l) cases)"
}

ignore_outputs() {
	local exclude
	exclude=$(cd "$ROOT" && git rev-parse --path-format=absolute --git-path info/exclude)
	mkdir -p "$(dirname "$exclude")"
	touch "$exclude"
	local p
	for p in /gpu-carry/ /gpu-work/ /gpu-out/; do
		grep -qxF "$p" "$exclude" || echo "$p" >>"$exclude"
	done
}

report_size() {
	local carried tracked
	carried=$(du -cb "$CARRY" | tail -1 | cut -f1)
	tracked=$(cd "$ROOT" && git ls-files -z | xargs -0 du -cb 2>/dev/null | awk '$2 == "total" {s += $1} END {print s}')
	du -h --max-depth=2 "$CARRY" | sort -k2
	echo "gpu-carry: $((carried / 1024)) KiB; tracked tree: $((tracked / 1024)) KiB; together $(((carried + tracked) / 1048576)) MiB of the 64 MiB a run carries"
	if ((carried + tracked > LIMIT_MIB * 1048576)); then
		echo "too large: over $LIMIT_MIB MiB" >&2
		exit 1
	fi
}

build_binaries
copy_models
pack_node_tests
ignore_outputs
report_size
