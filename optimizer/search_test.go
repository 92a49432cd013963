package optimizer

import (
	"context"
	"slices"
	"testing"
	"time"

	"rulebook/rules"
)

// ruleSet parses proved rules of the ≤3-operator rulebook.
func ruleSet(t *testing.T, texts ...string) *RuleSet {
	t.Helper()
	rs := &RuleSet{Version: "test"}
	for _, text := range texts {
		r, err := rules.ParseRule(rules.Default(), text)
		if err != nil {
			t.Fatal(err)
		}
		rs.Rules, rs.Texts = append(rs.Rules, r), append(rs.Texts, text)
	}
	return rs
}

// TestOptimizeKeepsOutputs optimizes squeezenet with rules that apply to it
// and checks that the rewritten model computes the same outputs.
func TestOptimizeKeepsOutputs(t *testing.T) {
	m, rt := load(t, "squeezenet1_1.onnx")
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	rs := ruleSet(t,
		"(concat 1 (relu ?a) (relu ?b)) => (relu (concat 1 ?a ?b))",
		"(ewadd ?a ?b) => (ewadd ?b ?a)",
	)
	opt := DefaultOptions()
	opt.Budget = 20
	res, err := Optimize(context.Background(), g, rs, opt)
	if err != nil {
		t.Fatal(err)
	}
	if res.After >= res.Before || res.Applied[0] == 0 {
		t.Fatalf("no improvement: %.4f -> %.4f ms, applied %v", res.Before, res.After, res.Applied)
	}
	decoded, rt2 := written(t, res.Graph)
	assertSameOutputs(t, rt, rt2)
	relus := 0
	for _, n := range decoded.Graph.Nodes {
		if n.OpType == "Relu" {
			relus++
		}
	}
	if relus >= 26 {
		t.Errorf("%d Relu nodes after merging relus across concats, want fewer than 26", relus)
	}
}

// TestOptimizeWithoutApplicableRules returns the model unchanged with a
// cost ratio of exactly 1.
func TestOptimizeWithoutApplicableRules(t *testing.T) {
	m, rt := load(t, "squeezenet1_1.onnx")
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Optimize(context.Background(), g, ruleSet(t, "(transpose (transpose ?a)) => ?a"), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if res.After != res.Before || res.Graph != g || len(res.Applied) != 0 || res.Stopped != "queue empty" {
		t.Errorf("cost %.4f -> %.4f, applied %v, stopped %s", res.Before, res.After, res.Applied, res.Stopped)
	}
}

// A gain below MinGain does not make a new best: merging Relus across
// concats saves squeezenet a fraction of a percent, under a 1% minimum.
func TestMinGain(t *testing.T) {
	m, rt := load(t, "squeezenet1_1.onnx")
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	rs := ruleSet(t, "(concat 1 (relu ?a) (relu ?b)) => (relu (concat 1 ?a ?b))")
	opt := DefaultOptions()
	opt.Budget = 20
	for _, c := range []struct {
		minGain  float64
		improves bool
	}{{0, true}, {0.01, false}} {
		opt.MinGain = c.minGain
		res, err := Optimize(context.Background(), g, rs, opt)
		if err != nil {
			t.Fatal(err)
		}
		if improves := res.After < res.Before; improves != c.improves || !improves && (res.Graph != g || len(res.Applied) != 0) {
			t.Errorf("min gain %g: cost %.4f -> %.4f, applied %v", c.minGain, res.Before, res.After, res.Applied)
		}
	}
}

// The progress a search reports never goes back and ends full, whichever
// way it stops: by budget, by time or with nothing left to expand (the
// bar used to end at the budget's share, 25% on a timeout).
func TestProgressEndsFull(t *testing.T) {
	m, rt := load(t, "squeezenet1_1.onnx")
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := LoadBundle(bundle3Ops)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		rules   *RuleSet
		budget  int
		timeout time.Duration
		stopped StopReason
	}{
		{bundle, 5, time.Minute, BudgetSpent},
		{bundle, 1 << 20, 300 * time.Millisecond, TimedOut},
		{ruleSet(t, "(transpose (transpose ?a)) => ?a"), 300, time.Minute, QueueEmpty},
	}
	for _, c := range cases {
		opt := DefaultOptions()
		opt.Budget, opt.Timeout = c.budget, c.timeout
		var fractions []float64
		opt.Progress = func(p Progress) { fractions = append(fractions, p.Fraction) }
		res, err := Optimize(context.Background(), g, c.rules, opt)
		if err != nil {
			t.Fatal(err)
		}
		if res.Stopped != c.stopped || len(fractions) < 2 || fractions[len(fractions)-1] != 1 || !slices.IsSorted(fractions) || fractions[0] < 0 {
			t.Errorf("stopped %s (want %s) with progress %v, want rising to 1", res.Stopped, c.stopped, fractions)
		}
	}
}
