package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/internal/testfiles"
	"rulebook/optimizer"
	"rulebook/runtime"
	"rulebook/store"
)

// optimize --device cuda --cost analytic searches with the GPU model,
// which needs no GPU: the report and the recorded run name the device
// modelled and the cost model, and the output says the costs are
// modelled.
func TestOptimizeDeviceCUDAAnalytic(t *testing.T) {
	ctx := context.Background()
	model := testfiles.Shared(t, "models", "squeezenet1_1.onnx")
	dir := t.TempDir()
	out, db := filepath.Join(dir, "sq.opt.onnx"), filepath.Join(dir, "r.db")
	text, err := run(ctx, "optimize", model, "--rules", "../../optimizer/testdata/rules-3ops.json", "--budget", "10",
		"--device", "cuda", "--cost", "analytic", "-o", out, "--db", db, "--no-progress")
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if !strings.Contains(text, "analytic model's estimate for cuda/NVIDIA H200, modelled, not measured") {
		t.Errorf("the output does not say the costs are modelled for the GPU:\n%s", text)
	}
	var rep optimizer.Report
	data, err := os.ReadFile(strings.TrimSuffix(out, ".onnx") + ".json")
	must(t, err)
	must(t, json.Unmarshal(data, &rep))
	if rep.Device != "cuda/NVIDIA H200" || rep.CostModel != "analytic" || rep.CostUnit != "model ms" || rep.After > rep.Before || rep.Before <= 0 {
		t.Errorf("report: device %q, cost model %q (%s), cost %.4f -> %.4f", rep.Device, rep.CostModel, rep.CostUnit, rep.Before, rep.After)
	}
	s, err := store.Open(ctx, db)
	must(t, err)
	defer s.Close()
	runs, err := s.Runs(ctx)
	must(t, err)
	if len(runs) != 1 || !strings.Contains(runs[0].Config, `"device":"cuda/NVIDIA H200"`) || !strings.Contains(runs[0].Config, `"cost":"analytic"`) {
		t.Errorf("recorded runs: %+v", runs)
	}
}

// Without a GPU, a GPU that must be timed (--device cuda --cost measured,
// --compare-on cuda) is refused in one line that says so, before the
// database, the model or the report is written.
func TestOptimizeWithoutGPUWritesNothing(t *testing.T) {
	gpu := runtime.CheckBackend(runtime.BackendCUDA)
	if gpu == nil {
		t.Skip("a GPU is present")
	}
	ctx := context.Background()
	model := testfiles.Shared(t, "models", "squeezenet1_1.onnx")
	for _, extra := range [][]string{
		{"--device", "cuda", "--cost", "measured"},
		{"--device", "cuda", "--cost", "measured", "--confirm", "3"},
		{"--compare", "2", "--compare-on", "cuda"},
		{"--device", "cuda", "--compare", "2", "--compare-on", "cpu,cuda"},
	} {
		dir := t.TempDir()
		out, db := filepath.Join(dir, "m.onnx"), filepath.Join(dir, "r.db")
		args := append([]string{"optimize", model, "--rules", "../../optimizer/testdata/rules-3ops.json", "--budget", "2",
			"-o", out, "--db", db, "--no-progress"}, extra...)
		text, err := run(ctx, args...)
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "CUDA is not available") {
			t.Errorf("%v: %v, want one line saying CUDA is not available\n%s", extra, err, text)
		}
		for _, p := range []string{out, filepath.Join(dir, "m.json"), db} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%v: wrote %s", extra, filepath.Base(p))
			}
		}
	}
}

// On a GPU, --device cuda --cost measured times operators on the CUDA
// backend, stores them under the GPU's name, confirms on the GPU and
// compares there too.
func TestOptimizeDeviceCUDAMeasured(t *testing.T) {
	device, err := runtime.CUDADevice()
	if err != nil {
		t.Skipf("no GPU: %v", err)
	}
	ctx := context.Background()
	model := testfiles.Shared(t, "models", "squeezenet1_1.onnx")
	dir := t.TempDir()
	out, db := filepath.Join(dir, "sq.opt.onnx"), filepath.Join(dir, "r.db")
	text, err := run(ctx, "optimize", model, "--rules", "../../optimizer/testdata/rules-3ops.json", "--budget", "3",
		"--device", "cuda", "--cost", "measured", "--confirm", "2", "--compare", "2", "--compare-on", "cuda", "-o", out, "--db", db, "--no-progress")
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	var rep optimizer.Report
	data, err := os.ReadFile(strings.TrimSuffix(out, ".onnx") + ".json")
	must(t, err)
	must(t, json.Unmarshal(data, &rep))
	if !strings.Contains(text, "measured on "+device) {
		t.Errorf("the output does not name the GPU the costs were measured on:\n%s", text)
	}
	if rep.Device != device || rep.CostModel != "measured" || rep.Before <= 0 || len(rep.MeasuredOn) != 1 || rep.MeasuredOn[0].Backend != runtime.BackendCUDA {
		t.Errorf("report: device %q (want %q), cost model %q, cost %.4f, measured on %+v", rep.Device, device, rep.CostModel, rep.Before, rep.MeasuredOn)
	}
	s, err := store.Open(ctx, db)
	must(t, err)
	defer s.Close()
	if costs, err := s.Costs(ctx, device); err != nil || len(costs) == 0 {
		t.Errorf("%d operator costs stored for %s (%v)", len(costs), device, err)
	}
}
