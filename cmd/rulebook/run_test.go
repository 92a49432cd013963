package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"rulebook/internal/testfiles"
	"rulebook/onnx"
	"rulebook/runtime/ort"
	"rulebook/store"
)

// sharedModel is the path of a file in the shared models folder (see
// testfiles.Shared).
func sharedModel(t *testing.T, name string) string {
	t.Helper()
	return testfiles.Shared(t, "models", name)
}

func TestRun(t *testing.T) {
	ctx := context.Background()
	model := sharedModel(t, "squeezenet1_1-full.onnx")
	input := sharedModel(t, "squeezenet1_1-full_test_data_set_0/input_0.pb")
	out, err := run(ctx, "run", model, "--input", input, "--repeat", "2")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{`(?m)^output +\[1 1000\] `, `median latency \S+ over 2 runs \(cpu backend, squeezenet1_1-full.onnx\)`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("run output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "random weights") {
		t.Errorf("squeezenet1_1-full has its weights inline, but run says:\n%s", out)
	}

	out, err = run(ctx, "run", sharedModel(t, "squeezenet1_1.onnx"), "--repeat", "1")
	if err != nil || !strings.Contains(out, "using random weights, seed 1") {
		t.Errorf("a model without its weights file (err %v):\n%s", err, out)
	}
}

func TestRunBadInput(t *testing.T) {
	ctx := context.Background()
	model := sharedModel(t, "squeezenet1_1-full.onnx")
	data, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	truncated := filepath.Join(dir, "cut.onnx")
	if err := os.WriteFile(truncated, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	relu := "/usr/share/libonnx-testdata/data/node/test_relu/test_data_set_0/input_0.pb"
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"truncated model", []string{"run", truncated}, `cut\.onnx.*byte \d+`},
		{"input of another shape", []string{"run", model, "--input", relu}, `input "input" has shape \[3 4 5\], but the model expects \[1 3 224 224\]`},
		{"cuda without a GPU", []string{"run", model, "--backend", "cuda"}, `--backend cuda: `},
		{"unknown backend", []string{"run", model, "--backend", "tpu"}, `--backend must be cpu, cuda or ort, or a comma-separated list of them, got "tpu"`},
		{"backend twice", []string{"run", model, "--backend", "cpu,cpu"}, `--backend cpu is named twice in "cpu,cpu"`},
		{"ort library named but missing", []string{"run", model, "--backend", "ort", "--ort-lib", "/nonexistent/libonnxruntime.so"},
			`^--backend ort: the ONNX Runtime library was not found \(looked in --ort-lib /nonexistent/libonnxruntime.so\); install it with "pip install onnxruntime==1.32.0" or point ONNXRUNTIME_LIB at libonnxruntime.so$`},
		{"bad weights mode", []string{"run", model, "--weights", "zeros"}, `--weights must be auto, file or random`},
		{"weights file required", []string{"run", sharedModel(t, "resnet50.onnx"), "--weights", "file"}, `resnet50\.weights`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "input of another shape" {
				if _, err := os.Stat(relu); err != nil {
					t.Skip("libonnx-testdata is not installed")
				}
			}
			out, err := run(ctx, c.args...)
			if err == nil || !regexp.MustCompile(c.want).MatchString(err.Error()) {
				t.Errorf("got %v, want an error matching %s\n%s", err, c.want, out)
			}
		})
	}
}

func TestBenchOps(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "r.db")
	model := sharedModel(t, "squeezenet1_1-full.onnx")
	out, err := run(ctx, "bench-ops", model, "--repeat", "2", "--threads", "2", "--db", db)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !regexp.MustCompile(`stored \d+ operator configurations for cpu/2`).MatchString(out) {
		t.Errorf("bench-ops output:\n%s", out)
	}
	s, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	costs, err := s.Costs(ctx, "cpu/2")
	if err != nil || len(costs) == 0 {
		t.Fatalf("no costs stored: %v", err)
	}
	// The optimizer looks measurements up by device, operator, shapes and
	// parameters: each stored row must be found that way.
	for _, c := range costs {
		got, ok, err := s.Cost(ctx, "cpu/2", c.Operator, c.Shapes, c.Params)
		if err != nil || !ok || got.Median != c.Median {
			t.Errorf("lookup of %s %s %s: %+v %v %v", c.Operator, c.Shapes, c.Params, got, ok, err)
		}
	}
	var convs int
	for _, c := range costs {
		if c.Operator == "Conv" {
			convs++
		}
	}
	if convs == 0 {
		t.Errorf("no Conv configuration among %d", len(costs))
	}

	before := fileHash(t, db)
	if _, err := run(ctx, "bench-ops", filepath.Join(t.TempDir(), "missing.onnx"), "--db", db); err == nil {
		t.Error("bench-ops of a missing model succeeded")
	}
	if fileHash(t, db) != before {
		t.Error("a failed bench-ops changed the database")
	}
}

// TestRunExpect checks squeezenet's output against ONNX's reference: the
// right one passes, a perturbed one fails and names the element, and
// references of another shape, type or number are refused clearly.
func TestRunExpect(t *testing.T) {
	ctx := context.Background()
	model := sharedModel(t, "squeezenet1_1-full.onnx")
	input := sharedModel(t, "squeezenet1_1-full_test_data_set_0/input_0.pb")
	output := sharedModel(t, "squeezenet1_1-full_test_data_set_0/output_0.pb")
	out, err := run(ctx, "run", model, "--input", input, "--expect", output, "--repeat", "1")
	if err != nil || !strings.Contains(out, "outputs match their references (rtol 0.001, atol 1e-05)") {
		t.Fatalf("the right reference (err %v):\n%s", err, out)
	}

	ref, err := onnx.ReadTensor(output)
	must(t, err)
	want, err := ref.Float64s()
	must(t, err)
	dir := t.TempDir()
	write := func(name string, dtype onnx.DataType, dims []int64, values []float64) string {
		t.Helper()
		pt := &onnx.Tensor{Name: "output", Dims: dims, DataType: dtype}
		for _, v := range values {
			if dtype == onnx.Float {
				pt.FloatData = append(pt.FloatData, float32(v))
			} else {
				pt.DoubleData = append(pt.DoubleData, v)
			}
		}
		path := filepath.Join(dir, name)
		must(t, os.WriteFile(path, onnx.EncodeTensor(pt), 0o644))
		return path
	}
	perturbed := slices.Clone(want)
	perturbed[617] += 0.01
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"perturbed", []string{"--expect", write("perturbed.pb", onnx.Float, ref.Dims, perturbed)},
			`output "output" differs from its reference at flat index 617, index \[0 617\]: got \S+, want \S+ \(rtol 0.001, atol 1e-05\); 1 of 1000 elements differ`},
		{"looser tolerance", []string{"--expect", write("loose.pb", onnx.Float, ref.Dims, perturbed), "--atol", "0.02"}, ""},
		{"other shape", []string{"--expect", write("shape.pb", onnx.Float, []int64{1, 10, 100}, want)},
			`shape\.pb: output "output" has shape \[1 1000\], but the reference has shape \[1 10 100\]`},
		{"other type", []string{"--expect", write("double.pb", onnx.Double, ref.Dims, want)},
			`double\.pb: output "output" is float32, but the reference holds DOUBLE data`},
		{"two files", []string{"--expect", output, "--expect", output}, `--expect: the model has 1 outputs, got 2 files`},
		{"missing file", []string{"--expect", filepath.Join(dir, "missing.pb")}, `missing\.pb`},
		{"negative tolerance", []string{"--expect", output, "--rtol", "-1"}, `--rtol and --atol must be finite and not negative`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := run(ctx, append([]string{"run", model, "--input", input, "--repeat", "1"}, c.args...)...)
			if c.want == "" {
				if err != nil {
					t.Errorf("%v\n%s", err, out)
				}
				return
			}
			if err == nil || !regexp.MustCompile(c.want).MatchString(err.Error()) {
				t.Errorf("got %v, want an error matching %s\n%s", err, c.want, out)
			}
		})
	}
}

// TestORTLibraryMissing: with ONNXRUNTIME_LIB naming a missing file, the
// ort backend stops before reading the model, in one line that says where
// it looked and how to get the library.
func TestORTLibraryMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libonnxruntime.so")
	t.Setenv("ONNXRUNTIME_LIB", missing)
	for _, cmd := range []string{"run", "bench-ops"} {
		out, err := run(context.Background(), cmd, filepath.Join(t.TempDir(), "absent.onnx"), "--backend", "cpu,ort", "--db", filepath.Join(t.TempDir(), "r.db"))
		want := "--backend ort: the ONNX Runtime library was not found (looked in ONNXRUNTIME_LIB=" + missing +
			`); install it with "pip install onnxruntime==1.32.0" or point ONNXRUNTIME_LIB at libonnxruntime.so`
		if err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want\n%s\n%s", cmd, err, want, out)
		}
	}
}

// ortLibrary skips a test where ONNX Runtime is not installed (CI installs
// it, so there it must be found).
func ortLibrary(t *testing.T) {
	t.Helper()
	if _, err := ort.DefaultSearch("").Find(context.Background()); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// TestRunSideBySide runs squeezenet on both backends: one line each, the
// ratio to the first, and ONNX Runtime's outputs within 1e-4 of ours.
func TestRunSideBySide(t *testing.T) {
	ortLibrary(t)
	out, err := run(context.Background(), "run", sharedModel(t, "squeezenet1_1.onnx"), "--backend", "cpu,ort", "--repeat", "3", "--threads", "2")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		`(?m)^BACKEND +DEVICE +MEDIAN +× cpu +OUTPUTS AGAINST cpu$`,
		`(?m)^cpu +cpu/2 +\S+ +1\.00 +-$`,
		`(?m)^ort +ort-cpu/2 +\S+ +\d+\.\d\d +largest difference (\d(\.\d)?e-0[5-9]|0) of largest \|output\|$`,
		`(?m)^medians of 3 runs each, alternating, after a warm-up run each$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
}

// TestBenchOpsORT stores ONNX Runtime's timings under their own device.
func TestBenchOpsORT(t *testing.T) {
	ortLibrary(t)
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "r.db")
	out, err := run(ctx, "bench-ops", sharedModel(t, "squeezenet1_1.onnx"), "--backend", "ort", "--repeat", "1", "--threads", "2", "--db", db)
	if err != nil || !regexp.MustCompile(`stored \d+ operator configurations for ort-cpu/2`).MatchString(out) {
		t.Fatalf("%v\n%s", err, out)
	}
	s, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for device, want := range map[string]bool{"ort-cpu/2": true, "cpu/2": false} {
		costs, err := s.Costs(ctx, device)
		if err != nil || (len(costs) > 0) != want {
			t.Errorf("%s: %d costs (%v)", device, len(costs), err)
		}
	}
}
