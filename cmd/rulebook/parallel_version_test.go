package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/internal/testfiles"
)

// TestParallelVersionLoads: a version built with --ops parallel loads in
// diff, compare, optimize, export and plan. Each format export cannot
// carry a rule in says why.
func TestParallelVersionLoads(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "pcg.db")
	if out, err := run(ctx, "build", "--ops", "parallel", "--degrees", "2", "--max-ops", "2", "--db", db, "--no-progress"); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	bundle, few := filepath.Join(dir, "v1.json"), filepath.Join(dir, "few.sexpr")
	model := testfiles.Shared(t, "models", "squeezenet1_1.onnx")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"export", "--version", "v1", "--format", "json", "-o", bundle}, nil},
		{[]string{"export", "--version", "v1", "--format", "sexpr", "--id", "1,2", "-o", few}, nil},
		{[]string{"export", "--version", "v1", "--format", "flexflow-json", "-o", filepath.Join(dir, "v1.ff.json")}, []string{"cannot carry", "an output is a graph input"}},
		{[]string{"export", "--version", "v1", "--format", "taso-pb", "-o", filepath.Join(dir, "v1.pb")}, []string{"cannot carry", "combine has no TASO operator type"}},
		{[]string{"export", "--version", "v1", "--format", "dot", "--op", "combine,relu", "-o", filepath.Join(dir, "v1.dot")}, nil},
		{[]string{"diff", "v1", bundle}, []string{"v1 (", ": 0 added, 0 removed"}},
		{[]string{"compare", "--version", "v1", few, "--no-progress"}, []string{"2 rules"}},
		{[]string{"optimize", model, "--rules", "v1", "--budget", "5", "-o", filepath.Join(dir, "m.onnx"), "--no-progress"}, []string{"wrote "}},
		{[]string{"plan", "mlp", "--batch", "1536", "--rules", bundle}, []string{"rules: " + bundle + " (v1) (", "parallel rules; the joint search applies them"}},
		{[]string{"plan", "mlp", "--batch", "1536", "--rules", "../../optimizer/testdata/rules-3ops.json"}, []string{"no parallel rules in it, so only the classic strategies"}},
	} {
		out, err := run(ctx, append(c.args, "--db", db)...)
		if err != nil {
			t.Errorf("%v: %v\n%s", c.args, err, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v lacks %q:\n%s", c.args, w, out)
			}
		}
	}
}

// TestCompareOnWithSpaces: --compare-on "cpu, ort" is read as "cpu,ort",
// once, and the side-by-side runs on both (ONNX Runtime needs its
// library; the test is skipped without it).
func TestCompareOnWithSpaces(t *testing.T) {
	ortLibrary(t)
	out, err := run(context.Background(), "optimize", sharedModel(t, "squeezenet1_1.onnx"), "--rules", "../../optimizer/testdata/rules-3ops.json",
		"--budget", "1", "--compare", "1", "--compare-on", "cpu, ort", "--threads", "1", "--no-progress",
		"-o", filepath.Join(t.TempDir(), "m.onnx"), "--db", filepath.Join(t.TempDir(), "r.db"))
	if err != nil || !strings.Contains(out, "measured (CPU runtime, 1 runs each)") || !strings.Contains(out, "measured (ONNX Runtime, 1 runs each)") {
		t.Fatalf("%v\n%s", err, out)
	}
}
