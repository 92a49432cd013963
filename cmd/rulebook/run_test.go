package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"rulebook/internal/testfiles"
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
		{"unknown backend", []string{"run", model, "--backend", "tpu"}, `--backend must be cpu or cuda, got "tpu"`},
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
