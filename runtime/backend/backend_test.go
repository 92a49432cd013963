package backend

import (
	"bytes"
	"context"
	"maps"
	"regexp"
	"strings"
	"testing"

	"rulebook/internal/testfiles"
	"rulebook/runtime"
)

func TestCheck(t *testing.T) {
	cases := []struct {
		list  string
		names []string
		err   string
	}{
		{"cpu", []string{"cpu"}, ""},
		{" cpu ", []string{"cpu"}, ""},
		{"tpu", nil, `--backend must be cpu, cuda or ort, or a comma-separated list of them, got "tpu"`},
		{"cpu,cpu", nil, `--backend cpu is named twice in "cpu,cpu"`},
		{"cpu,", nil, `got ""`},
		{"cpu,ort", []string{"cpu", "ort"}, "--backend ort: "},  // either accepted or, without the library, refused
		{"cpu, ort", []string{"cpu", "ort"}, "--backend ort: "}, // the same list as "cpu,ort"
	}
	for _, c := range cases {
		o := Options{ORTLibrary: ""}
		names, err := o.Check(context.Background(), c.list)
		switch {
		case strings.Contains(c.list, "ort") && err != nil:
			if !strings.HasPrefix(err.Error(), c.err) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%q: %v", c.list, err)
			}
		case c.names != nil:
			if err != nil || strings.Join(names, ",") != strings.Join(c.names, ",") {
				t.Errorf("%q: %v, %v; want %v", c.list, names, err, c.names)
			}
		case err == nil || !strings.Contains(err.Error(), c.err):
			t.Errorf("%q: %v, want %s", c.list, err, c.err)
		}
	}
}

func TestParseFlags(t *testing.T) {
	if m, err := ParseWeights("random"); err != nil || m != runtime.WeightsRandom {
		t.Errorf("random: %v %v", m, err)
	}
	if _, err := ParseWeights("zeros"); err == nil || !strings.Contains(err.Error(), "--weights must be auto, file or random") {
		t.Errorf("zeros: %v", err)
	}
	cases := []struct {
		specs []string
		dims  map[string]int
	}{
		{nil, map[string]int{}},
		{[]string{"batch=4", "seq=64"}, map[string]int{"batch": 4, "seq": 64}},
		{[]string{"batch"}, nil},
		{[]string{"=4"}, nil},
		{[]string{"batch=0"}, nil},
	}
	for _, c := range cases {
		dims, err := ParseDims(c.specs)
		if c.dims == nil {
			if err == nil || !strings.Contains(err.Error(), "expected NAME=N with N ≥ 1") {
				t.Errorf("%v: %v", c.specs, err)
			}
			continue
		}
		if err != nil || !maps.Equal(dims, c.dims) {
			t.Errorf("%v: %v %v", c.specs, dims, err)
		}
	}
}

// TestSideBySide runs squeezenet on two CPU sessions of different thread
// counts: each is timed, keyed by its device, and their outputs agree.
func TestSideBySide(t *testing.T) {
	var notes bytes.Buffer
	m, err := Load(&notes, testfiles.Shared(t, "models", "squeezenet1_1.onnx"), Options{Load: runtime.LoadOptions{Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(notes.String(), "using random weights, seed 1") {
		t.Errorf("notes: %q", notes.String())
	}
	var execs []runtime.Executor
	for _, threads := range []int{1, 2} {
		e, err := Open(&notes, m, runtime.BackendCPU, Options{Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		execs = append(execs, e)
	}
	defer CloseAll(execs)
	results, err := SideBySide(context.Background(), execs, m.RandomInputs(1), 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[0].Device != "cpu/1" || results[1].Device != "cpu/2" || results[0].Median <= 0 {
		t.Fatalf("results %+v", results)
	}
	var out bytes.Buffer
	if err := WriteSideBySide(&out, m, []string{"cpu", "cpu"}, results, 2); err != nil {
		t.Fatal(err)
	}
	want := `(?m)^cpu +cpu/2 +\S+ +\d+\.\d\d +largest difference \S+ of largest \|output\|$`
	if !regexp.MustCompile(want).MatchString(out.String()) {
		t.Errorf("output lacks %s:\n%s", want, out.String())
	}
	if d := relativeDifference(m, results[0].Outputs, results[1].Outputs); d > 1e-6 {
		t.Errorf("outputs on 1 and 2 threads differ by %g of the largest", d)
	}
}

// TestCheckPrecision: --precision takes fp32, tf32 or bf16, and other
// than fp32 only with the cuda backend.
func TestCheckPrecision(t *testing.T) {
	for _, c := range []struct{ precision, list, err string }{
		{"", "cpu", ""},
		{"fp32", "cpu", ""},
		{"fp16", "cpu", "--precision must be fp32, tf32 or bf16, got \"fp16\""},
		{"tf32", "cpu", "--precision tf32 applies to --backend cuda only"},
		{"bf16", "cpu,tpu", "--precision bf16 applies to --backend cuda only"},
	} {
		o := Options{Precision: c.precision}
		_, err := o.Check(context.Background(), c.list)
		if (c.err == "") != (err == nil) || (err != nil && err.Error() != c.err) {
			t.Errorf("--precision %q --backend %s: %v, want %q", c.precision, c.list, err, c.err)
		}
	}
	o := Options{Precision: "tf32"}
	if _, err := o.Check(context.Background(), "cpu,cuda"); err != nil && strings.Contains(err.Error(), "precision") {
		t.Errorf("tf32 with cuda listed: %v", err)
	}
}
