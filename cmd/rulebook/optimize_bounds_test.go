package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rulebook/onnx"
	"rulebook/optimizer"
	"rulebook/runtime"
)

// writeChainModel writes a model of n nodes in one chain to path: matrix
// products by 16×16 weights alternating with Relus, y = relu(…relu(x·w0)·w2…).
// Every node is a rewrite site, so one expansion of the search takes a
// minute: what bounds must hold against.
func writeChainModel(t *testing.T, path string, n int) {
	t.Helper()
	info := func(name string) *onnx.ValueInfo {
		return &onnx.ValueInfo{Name: name, IsTensor: true, ElemType: onnx.Float, HasShape: true,
			Shape: []onnx.Dim{{Value: 1, HasValue: true}, {Value: 16, HasValue: true}}}
	}
	g := &onnx.Graph{Name: "chain", Inputs: []*onnx.ValueInfo{info("x")}, Outputs: []*onnx.ValueInfo{info("y")}}
	prev := "x"
	for i := range n {
		out := "v" + strconv.Itoa(i)
		if i == n-1 {
			out = "y"
		}
		node := &onnx.Node{Name: "n" + strconv.Itoa(i), OpType: "Relu", Inputs: []string{prev}, Outputs: []string{out}}
		if i%2 == 0 {
			w := "w" + strconv.Itoa(i)
			var raw []byte
			for k := range 16 * 16 {
				raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(float32((k+i)%7)/7-0.5))
			}
			g.Initializers = append(g.Initializers, &onnx.Tensor{Name: w, Dims: []int64{16, 16}, DataType: onnx.Float, RawData: raw, HasRawData: true})
			node.OpType, node.Inputs = "MatMul", []string{prev, w}
		}
		g.Nodes = append(g.Nodes, node)
		prev = out
	}
	must(t, onnx.WriteModel(path, &onnx.Model{IRVersion: 8, OpsetImports: []onnx.OperatorSetID{{Version: 13}}, Graph: g}))
}

// chainSetup builds the binary and a 1,000-node chain model in a fresh
// folder, and returns the binary, the model and the test bundle.
func chainSetup(t *testing.T) (bin, model, bundle string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	model = filepath.Join(dir, "chain.onnx")
	writeChainModel(t, model, 1000)
	bundle, err := filepath.Abs("../../optimizer/testdata/rules-3ops.json")
	must(t, err)
	return buildBinary(t), model, bundle
}

// readWritten checks that optimize wrote a model the runtime loads and a
// report, in dir, and returns the report.
func readWritten(t *testing.T, dir, base string) optimizer.Report {
	t.Helper()
	if _, _, err := runtime.Load(filepath.Join(dir, base+".opt.onnx"), runtime.LoadOptions{Weights: runtime.WeightsFile}); err != nil {
		t.Fatalf("the written model does not load: %v", err)
	}
	var rep optimizer.Report
	data, err := os.ReadFile(filepath.Join(dir, base+".opt.json"))
	must(t, err)
	must(t, json.Unmarshal(data, &rep))
	return rep
}

// --timeout bounds the search on a 1,000-node chain, where one expansion
// takes a minute: the command ends within 10% or 1 s of it, whichever is
// more, having written the best graph so far.
func TestOptimizeHonoursTimeout(t *testing.T) {
	bin, model, bundle := chainSetup(t)
	const timeout = 3 * time.Second
	cmd := exec.Command(bin, "optimize", model, "--rules", bundle, "--timeout", timeout.String(), "--no-progress")
	cmd.Dir = t.TempDir()
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("optimize: %v\n%s", err, out)
	}
	if slack := max(timeout/10, time.Second); took > timeout+slack {
		t.Errorf("optimize --timeout %s took %s, more than %s over\n%s", timeout, took.Round(time.Millisecond), slack, out)
	}
	rep := readWritten(t, cmd.Dir, "chain")
	if rep.Search.Stopped != optimizer.TimedOut || rep.Search.Seen < 2 {
		t.Errorf("search stopped: %s after %d graphs seen, want a timeout in the middle of the search", rep.Search.Stopped, rep.Search.Seen)
	}
}

// A real SIGINT (Ctrl-C) in the middle of the search on a 1,000-node
// chain stops optimize within 2 s with the exit status of an interrupt;
// it has written the best graph found so far, which loads, and its
// report, and says so.
func TestCtrlCDuringOptimizeWritesTheBestSoFar(t *testing.T) {
	bin, model, bundle := chainSetup(t)
	cmd := exec.Command(bin, "optimize", model, "--rules", bundle, "--no-progress")
	cmd.Dir = t.TempDir()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, cmd.Start())
	time.Sleep(2 * time.Second) // loading the chain takes milliseconds: this is mid-search
	must(t, cmd.Process.Signal(syscall.SIGINT))
	sent := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 130 {
			t.Fatalf("optimize after SIGINT: %v (want exit 130)\n%s", err, out.String())
		}
		if took := time.Since(sent); took > 2*time.Second {
			t.Errorf("optimize took %s to stop after SIGINT, want at most 2 s", took.Round(time.Millisecond))
		}
	case <-time.After(30 * time.Second):
		must(t, cmd.Process.Kill())
		t.Fatalf("optimize did not stop within 30 s of SIGINT\n%s", out.String())
	}
	if !strings.Contains(out.String(), "interrupted during the search: wrote the best graph found so far to chain.opt.onnx") {
		t.Errorf("the output does not say what was written on interrupt:\n%s", out.String())
	}
	rep := readWritten(t, cmd.Dir, "chain")
	if rep.Search.Stopped != optimizer.Interrupted || rep.Search.Seen < 2 {
		t.Errorf("search stopped: %s after %d graphs seen, want an interruption in the middle of the search", rep.Search.Stopped, rep.Search.Seen)
	}
}
