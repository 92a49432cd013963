package optimizer

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"rulebook/onnx"
	"rulebook/rewrite"
	"rulebook/rules"
	"rulebook/runtime"
	"rulebook/version"
)

// bundleRules are the released ≤3-operator rules of these texts, with the
// shapes they were proved at.
func bundleRules(t *testing.T, texts ...string) *version.Set {
	t.Helper()
	all, err := version.LoadBundle(bundle3Ops)
	if err != nil {
		t.Fatal(err)
	}
	rs := &version.Set{Tag: "test"}
	for i, text := range all.Texts {
		if slices.Contains(texts, text) {
			rs.Rules, rs.Texts = append(rs.Rules, all.Rules[i]), append(rs.Texts, text)
		}
	}
	if len(rs.Rules) != len(texts) {
		t.Fatalf("found %d of the rules %q in %s", len(rs.Rules), texts, bundle3Ops)
	}
	return rs
}

// ruleSet parses proved rules of the ≤3-operator rulebook.
func ruleSet(t *testing.T, texts ...string) *version.Set {
	t.Helper()
	rs := &version.Set{Tag: "test"}
	for _, text := range texts {
		r, err := rules.ParseRule(rules.Default(), text)
		if err != nil {
			t.Fatal(err)
		}
		rs.Rules, rs.Texts = append(rs.Rules, r), append(rs.Texts, text)
	}
	return rs
}

// halvedProducts is a model of products by weights, each of an
// activation halved first: x·0.5·W1, relu'd, ·0.5·W2, and so on, with x
// of rows × the first width.
func halvedProducts(t *testing.T, rows int, widths ...int) (*onnx.Model, *runtime.Model) {
	t.Helper()
	weights := map[string][]int{"half": {}}
	var nodes []*onnx.Node
	in := "x"
	for i := 1; i < len(widths); i++ {
		w, h, p := fmt.Sprint("w", i), fmt.Sprint("h", i), fmt.Sprint("p", i)
		weights[w] = []int{widths[i-1], widths[i]}
		nodes = append(nodes,
			&onnx.Node{Name: h, OpType: "Mul", Inputs: []string{in, "half"}, Outputs: []string{h}},
			&onnx.Node{Name: p, OpType: "MatMul", Inputs: []string{h, w}, Outputs: []string{p}})
		in = p
		if i < len(widths)-1 {
			in = fmt.Sprint("r", i)
			nodes = append(nodes, &onnx.Node{Name: in, OpType: "Relu", Inputs: []string{p}, Outputs: []string{in}})
		}
	}
	return tinyModel(t, []int{rows, widths[0]}, weights, []string{in}, nodes...)
}

// TestOptimizeKeepsOutputs optimizes a model with a rule that folds each
// halving into the next product's weight, and checks that the rewritten
// model computes the same outputs with three Muls fewer.
func TestOptimizeKeepsOutputs(t *testing.T) {
	m, rt := halvedProducts(t, 8, 16, 16, 16, 16)
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	rs := bundleRules(t, "(matmul (smul ?a ?b) ?c) => (matmul ?a (smul ?c ?b))", "(ewadd ?a ?b) => (ewadd ?b ?a)")
	opt := DefaultOptions()
	opt.Budget = 20
	res, err := Optimize(context.Background(), g, rs, opt)
	if err != nil {
		t.Fatal(err)
	}
	applied := 0
	for _, n := range res.Applied {
		applied += n
	}
	if res.After >= res.Before || applied != 3 {
		t.Fatalf("no improvement: %.4f -> %.4f ms, applied %v", res.Before, res.After, res.Applied)
	}
	decoded, rt2 := written(t, res.Graph)
	assertSameOutputs(t, rt, rt2)
	muls := func(nodes []*onnx.Node) int {
		n := 0
		for _, node := range nodes {
			if node.OpType == "Mul" {
				n++
			}
		}
		return n
	}
	if before, after := muls(m.Graph.Nodes), muls(decoded.Graph.Nodes); after != before-3 {
		t.Errorf("%d Mul nodes after folding the halving into weights, want %d", after, before-3)
	}
}

// Runtimes apply a Relu in the pass of the convolution before it, so
// merging squeezenet's Relus across its concats would add a pass: the
// search keeps them where they are.
func TestRelusStayFused(t *testing.T) {
	m, rt := load(t, "squeezenet1_1.onnx")
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Optimize(context.Background(), g, ruleSet(t, "(concat 1 (relu ?a) (relu ?b)) => (relu (concat 1 ?a ?b))"), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if res.After != res.Before || len(res.Applied) != 0 || res.BeforeByOperator["relu"].Ms != 0 {
		t.Errorf("cost %.4f -> %.4f, applied %v, relus priced %.4f ms", res.Before, res.After, res.Applied, res.BeforeByOperator["relu"].Ms)
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

// A gain below MinGain does not make a new best: folding the halving
// into a large product saves 1.2% of the model's cost, under a 2%
// minimum.
func TestMinGain(t *testing.T) {
	m, rt := halvedProducts(t, 64, 512, 4096)
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	rs := bundleRules(t, "(matmul (smul ?a ?b) ?c) => (matmul ?a (smul ?c ?b))")
	opt := DefaultOptions()
	opt.Budget = 20
	for _, c := range []struct {
		minGain  float64
		improves bool
	}{{0, true}, {0.02, false}} {
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
	bundle, err := version.LoadBundle(bundle3Ops)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		rules   *version.Set
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

// A graph queued more than once, as a neighbour of two graphs or of its
// own neighbour, is expanded once: step keys each graph it takes from the
// queue and drops the repeats.
func TestQueuedRepeatsExpandOnce(t *testing.T) {
	rs, err := version.LoadBundle(bundle3Ops)
	if err != nil {
		t.Fatal(err)
	}
	repeats := 0
	for _, c := range []struct {
		model  string
		budget int
	}{{"squeezenet1_1.onnx", 40}, {"bert_base.onnx", 15}} {
		t.Run(c.model, func(t *testing.T) {
			g := loadGraph(t, c.model)
			keys := map[string]bool{}
			opt := DefaultOptions()
			opt.Budget, opt.Timeout = c.budget, time.Hour
			opt.expanded = func(g *Graph, key string) {
				if keys[key] {
					t.Errorf("graph %d expanded again", len(keys))
				}
				if want := rewrite.CommutativeKey(&g.G); key != want {
					t.Errorf("graph %d keyed %x, built %x", len(keys), key, want)
				}
				keys[key] = true
			}
			res, err := Optimize(context.Background(), g, rs, opt)
			if err != nil {
				t.Fatal(err)
			}
			if res.Explored != len(keys) || res.Explored != c.budget {
				t.Errorf("%d graphs expanded, %d distinct, budget %d", res.Explored, len(keys), c.budget)
			}
			t.Logf("%d graphs generated, %d queued, %d repeats dropped", res.Generated, res.Seen, res.Repeats)
			repeats += res.Repeats
		})
	}
	if repeats == 0 {
		t.Error("no queued graph repeated an expanded one: nothing checked")
	}
}
