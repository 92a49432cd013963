package ort

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/internal/testfiles"
	"rulebook/runtime"
)

// library finds the ONNX Runtime library as the command does, and skips
// the test where there is none; CI installs it, so there it must be found.
func library(t *testing.T) string {
	t.Helper()
	lib, err := DefaultSearch("").Find(context.Background())
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v (CI installs it with scripts/requirements-bridge.txt)", err)
		}
		t.Skip(err)
	}
	return lib
}

// TestSameOutputs runs shared models on both backends, with the weights
// the runtime generates, and checks that every output element agrees
// within 1e-4 of the reference relative to the output's scale: logits
// near zero have no relative precision of their own, and summation order
// differs between the two.
func TestSameOutputs(t *testing.T) {
	lib := library(t)
	for _, name := range []string{"squeezenet1_1.onnx", "resnet50.onnx", "squeezenet1_1-full.onnx"} {
		t.Run(name, func(t *testing.T) {
			if testing.Short() && name == "resnet50.onnx" {
				t.Skip("resnet50 takes a while; skipped with -short")
			}
			m, _, err := runtime.Load(testfiles.Shared(t, "models", name), runtime.LoadOptions{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			feeds := m.RandomInputs(3)
			ours := run(t, m, feeds, func() (runtime.Executor, error) { return m.NewSession(runtime.SessionOptions{Threads: 2}) })
			theirs := run(t, m, feeds, func() (runtime.Executor, error) { return Open(m, Options{Library: lib, Threads: 2}) })
			for _, o := range m.Outputs() {
				want := ours[o.Name]
				tol := runtime.Tolerance{RTol: 1e-4, ATol: 1e-4 * largest(want.Data)}
				if err := m.CheckOutputs(theirs, []*runtime.Tensor{want}, tol); err != nil {
					t.Errorf("ONNX Runtime against the runtime: %v", err)
				}
			}
		})
	}
}

// TestWeightsTravel is TestSameOutputs' control: ONNX Runtime on weights
// generated from another seed must disagree, or the agreement above would
// say nothing about the weights reaching it.
func TestWeightsTravel(t *testing.T) {
	lib := library(t)
	path := testfiles.Shared(t, "models", "squeezenet1_1.onnx")
	outputs := make([]map[string]*runtime.Tensor, 2)
	var m *runtime.Model
	for seed := range outputs {
		var err error
		if m, _, err = runtime.Load(path, runtime.LoadOptions{Seed: uint64(seed + 1)}); err != nil {
			t.Fatal(err)
		}
		outputs[seed] = run(t, m, m.RandomInputs(3), func() (runtime.Executor, error) { return Open(m, Options{Library: lib, Threads: 2}) })
	}
	name := m.Outputs()[0].Name
	if err := m.CheckOutputs(outputs[0], []*runtime.Tensor{outputs[1][name]}, runtime.Tolerance{RTol: 1e-2}); err == nil {
		t.Error("ONNX Runtime gives the same outputs for weights of seeds 1 and 2")
	}
}

func run(t *testing.T, m *runtime.Model, feeds map[string]*runtime.Tensor, open func() (runtime.Executor, error)) map[string]*runtime.Tensor {
	t.Helper()
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	outs, err := e.Run(context.Background(), feeds)
	if err != nil {
		t.Fatal(err)
	}
	return outs
}

func largest(data []float32) float64 {
	var m float64
	for _, x := range data {
		m = math.Max(m, math.Abs(float64(x)))
	}
	return m
}

// TestTimeNode times every distinct configuration of inception_v3 (Conv,
// Pad with its integer pads, pooling, Concat, Gemm) and of bert_base
// (Reshape's integer shapes, MatMul, Softmax) in ONNX Runtime, and keys
// them apart from the runtime's own timings.
func TestTimeNode(t *testing.T) {
	lib := library(t)
	for _, name := range []string{"inception_v3.onnx", "bert_base.onnx"} {
		t.Run(name, func(t *testing.T) {
			if testing.Short() {
				t.Skip("times every configuration; skipped with -short")
			}
			m, _, err := runtime.Load(testfiles.Shared(t, "models", name), runtime.LoadOptions{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			s, err := Open(m, Options{Library: lib, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if key := s.DeviceKey(); key != "ort-cpu/1" {
				t.Errorf("DeviceKey = %q, want ort-cpu/1", key)
			}
			configs := runtime.DistinctConfigs(m.Nodes())
			times, err := runtime.TimeConfigs(context.Background(), s, configs, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, d := range times {
				if d <= 0 {
					t.Errorf("%s: %v", configs[i].ConfigKey(), d)
				}
			}
		})
	}
}

// TestLoadOnce refuses a second library in one process: the environment
// is process-wide.
func TestLoadOnce(t *testing.T) {
	lib := library(t)
	if err := Load(lib); err != nil {
		t.Fatal(err)
	}
	if err := Load(lib); err != nil {
		t.Errorf("loading the same library again: %v", err)
	}
	other := filepath.Join(t.TempDir(), "libonnxruntime-other.so")
	if err := os.Symlink(lib, other); err != nil {
		t.Fatal(err)
	}
	if err := Load(other); err == nil || !strings.Contains(err.Error(), "already loaded from "+lib) {
		t.Errorf("loading another library: %v", err)
	}
	if v := Version(); !strings.HasPrefix(v, "1.") {
		t.Errorf("Version = %q", v)
	}
}
