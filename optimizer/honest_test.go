package optimizer

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/onnx"
	"rulebook/rules"
	"rulebook/runtime"
	"rulebook/version"
)

// A compared rewrite whose outputs differ beyond the tolerance is not
// written (issue 25): a rule that drops a term of x·w1 + x·w2 is cheaper
// and wrong, and the job fails with ErrOutputsDiffer and writes neither
// the model nor the report; the true distributivity rule on the same model
// is written.
func TestCompareRefusesDifferingOutputs(t *testing.T) {
	cases := []struct {
		name, src, dst string
		refused        bool
	}{
		{"false rule", "(ewadd (matmul ?a ?b) (matmul ?a ?c))", "(matmul ?a ?b)", true},
		{"true rule", "(ewadd (matmul ?a ?b) (matmul ?a ?c))", "(matmul ?a (ewadd ?b ?c))", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			model := twoProductsModel(t, dir)
			rt, g, _, err := LoadModel(model, runtime.LoadOptions{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			text, err := rules.ParseText(rules.Default(), c.src+" => "+c.dst, "?a:2x4 ?b:4x4 ?c:4x4", "")
			if err != nil {
				t.Fatal(err)
			}
			rs := &version.Set{Tag: "test", Rules: []*rules.Rule{text.Rule()}, Texts: []string{text.String()}, RuleHashes: []string{"h"}}
			opt := DefaultOptions()
			opt.Budget = 10
			job := Job{Path: model, Runtime: rt, Graph: g, Rules: rs, Options: opt, CostModel: "analytic", Compare: 2, Threads: 1, Seed: 1,
				Output: filepath.Join(dir, "out.onnx"), Report: filepath.Join(dir, "out.json")}
			rep, err := job.Run(context.Background())
			if got := errors.Is(err, ErrOutputsDiffer); got != c.refused {
				t.Fatalf("refused %v (err %v), want %v", got, err, c.refused)
			}
			for _, p := range []string{job.Output, job.Report} {
				if _, statErr := os.Stat(p); (statErr == nil) == c.refused {
					t.Errorf("%s written: %v, want %v", p, statErr == nil, !c.refused)
				}
			}
			if !c.refused && (len(rep.Applied) != 1 || rep.Measured.MaxRelDiff > DefaultTolerance) {
				t.Errorf("applied %+v, outputs differ by %g", rep.Applied, rep.Measured.MaxRelDiff)
			}
		})
	}
}

// The report claims a speed-up only where a rule applied and the medians
// differ by more than the spread of the runs (issue 25: bert_base with no
// rule applied was reported 1.09x faster).
func TestReportClaimsSpeedupOnlyBeyondSpread(t *testing.T) {
	applied := []AppliedRule{{Rule: "(relu (relu ?a)) => (relu ?a)", Count: 1, LeftToRight: 1}}
	cases := []struct {
		name    string
		applied []AppliedRule
		m       SideBySide
		claims  bool
	}{
		{"nothing applied", []AppliedRule{}, SideBySide{Runs: 5, Original: 945, Optimized: 866, Spread: 10, Speedup: 945.0 / 866}, false},
		{"within the spread", applied, SideBySide{Runs: 5, Original: 945, Optimized: 900, Spread: 60, Speedup: 945.0 / 900}, false},
		{"one run", applied, SideBySide{Runs: 1, Original: 945, Optimized: 500, Speedup: 945.0 / 500}, false},
		{"beyond the spread", applied, SideBySide{Runs: 5, Original: 945, Optimized: 500, Spread: 20, Speedup: 945.0 / 500}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &Report{CostModel: "analytic", Applied: c.applied, Measured: &c.m}
			var out bytes.Buffer
			r.WriteText(&out)
			if claims := strings.Contains(out.String(), "1.89x"); claims != c.claims {
				t.Errorf("claims a speed-up %v, want %v:\n%s", claims, c.claims, out.String())
			}
			if !strings.Contains(out.String(), "spread") {
				t.Errorf("the spread is not reported:\n%s", out.String())
			}
		})
	}
}

// The report says which way each rule was used (issue 25: inception's
// conv-split rule was used right to left and listed left to right). Two
// products of one activation merge into one product of the concatenated
// weights: the rule's smaller side, its target, is what the model has.
func TestAppliedRuleDirection(t *testing.T) {
	m, rt := tinyModel(t, []int{8, 16}, map[string][]int{"w1": {16, 16}, "w2": {16, 16}}, []string{"y1", "y2"},
		&onnx.Node{Name: "mm1", OpType: "MatMul", Inputs: []string{"x", "w1"}, Outputs: []string{"y1"}},
		&onnx.Node{Name: "mm2", OpType: "MatMul", Inputs: []string{"x", "w2"}, Outputs: []string{"y2"}})
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	rs := shapedRuleSet(t, "(let ((%0 (matmul ?a (concat 1 ?b ?c)))) (outputs (split0 1 %0) (split1 1 %0)))",
		"(outputs (matmul ?a ?b) (matmul ?a ?c))", "?a:2x4 ?b:4x4 ?c:4x4")
	rs.RuleHashes = []string{"h"}
	opt := DefaultOptions()
	opt.Budget, opt.Cost = 5, products{}
	res, err := Optimize(context.Background(), g, rs, opt)
	if err != nil {
		t.Fatal(err)
	}
	r := NewReport("m.onnx", "analytic", rs, g, res, nil)
	if len(r.Applied) != 1 || r.Applied[0].RightToLeft != 1 || r.Applied[0].LeftToRight != 0 {
		t.Fatalf("applied %+v, want the rule once right to left", r.Applied)
	}
	var out bytes.Buffer
	r.WriteText(&out)
	if !strings.Contains(out.String(), "(right to left)") {
		t.Errorf("the text does not say the direction:\n%s", out.String())
	}
}
