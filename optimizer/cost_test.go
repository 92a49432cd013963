package optimizer

import (
	"context"
	"math"
	"strings"
	"testing"

	"rulebook/onnx"
)

// Measured costs come from the runtime's timings of the lowered nodes:
// each configuration is timed once, known ones are not timed again, and a
// search with measured costs keeps the model's outputs.
func TestMeasuredCost(t *testing.T) {
	m, rt := load(t, "squeezenet1_1.onnx")
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	known := map[OpKey]float64{}
	recorded := 0
	cost := &Measured{Repeat: 1,
		Known:  func(k OpKey) (float64, bool) { ms, ok := known[k]; return ms, ok },
		Record: func(k OpKey, ms float64) { known[k] = ms; recorded++ }}
	total := cost.Cost(g)
	if err := cost.Err(); err != nil {
		t.Fatal(err)
	}
	if total <= 0 || recorded == 0 || cost.Measurements() != recorded {
		t.Fatalf("cost %.3f ms after %d measurements, %d recorded", total, cost.Measurements(), recorded)
	}
	convs := 0
	for k := range known {
		if k.Operator == "Conv" && strings.Contains(k.Shapes, ",") {
			convs++
		}
	}
	if convs == 0 {
		t.Errorf("no Conv configuration among %d measured", len(known))
	}
	if again := cost.Cost(g); again != total || cost.Measurements() != recorded {
		t.Errorf("second pricing: %.3f ms (was %.3f), %d measurements (was %d)", again, total, cost.Measurements(), recorded)
	}
	fresh := &Measured{Known: cost.Known, Record: cost.Record}
	if fresh.Cost(g); fresh.Measurements() != 0 {
		t.Errorf("%d configurations timed again though all were known", fresh.Measurements())
	}

	opt := DefaultOptions()
	opt.Budget, opt.Cost = 10, cost
	res, err := Optimize(context.Background(), g, ruleSet(t, "(concat 1 (relu ?a) (relu ?b)) => (relu (concat 1 ?a ?b))"), opt)
	if err != nil {
		t.Fatal(err)
	}
	if res.After > res.Before || cost.Err() != nil {
		t.Errorf("measured cost %.3f -> %.3f ms (%v)", res.Before, res.After, cost.Err())
	}
	_, rt2 := written(t, res.Graph)
	assertSameOutputs(t, rt, rt2)
	assertSplit(t, cost, res.Graph, res.After, res.AfterByOperator)
}

// The split by operator adds up to the cost, for both cost models, and
// names operators as people know them.
func TestCostByOperator(t *testing.T) {
	m, rt := load(t, "squeezenet1_1.onnx")
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	by := ByOperator(DefaultCPU(), g)
	assertSplit(t, DefaultCPU(), g, DefaultCPU().Cost(g), by)
	want := map[string]int{"conv2d": 26, "relu": 26, "concat": 8, "MaxPool": 3, "GlobalAveragePool": 1, "Flatten": 1}
	for op, n := range want {
		if by[op].Nodes != n {
			t.Errorf("%s: %d nodes priced, want %d (split %v)", op, by[op].Nodes, n, by)
		}
	}
	if ByOperator(products{}, g) != nil {
		t.Error("a cost model that does not price node by node was split")
	}
}

func assertSplit(t *testing.T, cost CostModel, g *Graph, total float64, by map[string]OperatorCost) {
	t.Helper()
	sum := 0.0
	for _, c := range by {
		sum += c.Ms
	}
	if math.Abs(sum-total) > 1e-9*total || math.Abs(cost.Cost(g)-total) > 1e-9*total {
		t.Errorf("split adds up to %.6f ms, cost is %.6f ms", sum, total)
	}
}

// Memory counts weights as stored and the activations alive at once; the
// search refuses a model above its memory limit.
func TestMemory(t *testing.T) {
	m, rt := tinyModel(t, []int{1, 4, 8, 8}, map[string][]int{"b": {4, 1, 1}}, []string{"y"},
		&onnx.Node{Name: "r1", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"h"}},
		&onnx.Node{Name: "add", OpType: "Add", Inputs: []string{"h", "b"}, Outputs: []string{"a"}},
		&onnx.Node{Name: "r2", OpType: "Relu", Inputs: []string{"a"}, Outputs: []string{"y"}})
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	// The bias is stored as 4 floats; two 1×4×8×8 activations are alive
	// at once (each node's input until it has written its output).
	if got, want := g.Memory(), int64(4*4+2*4*256); got != want {
		t.Errorf("memory %d bytes, want %d", got, want)
	}
	opt := DefaultOptions()
	opt.MemoryLimit = g.Memory() - 1
	if _, err := Optimize(context.Background(), g, ruleSet(t, "(ewadd ?a ?b) => (ewadd ?b ?a)"), opt); err == nil || !strings.Contains(err.Error(), "memory limit") {
		t.Errorf("a model above the memory limit: %v", err)
	}
}

// A measured search keeps its rewrite only if the gain holds when the
// changed operators are timed again side by side: a removed activation
// holds; a rewrite that only looked cheaper through stale stored timings
// is undone.
func TestConfirmMeasuredGain(t *testing.T) {
	relu := func(name, in, out string) *onnx.Node {
		return &onnx.Node{Name: name, OpType: "Relu", Inputs: []string{in}, Outputs: []string{out}}
	}
	cases := []struct {
		name  string
		nodes []*onnx.Node
		rule  [3]string
		// stale are stored timings of the Relu configurations whose
		// output shape ends the key.
		stale map[string]float64
		held  bool
	}{
		{"removed activations", []*onnx.Node{relu("r1", "x", "h"), relu("r2", "h", "i"), relu("r3", "i", "y")},
			[3]string{"(relu (relu ?a))", "(relu ?a)", "?a:2x4x5x5"}, nil, true},
		{"stale timings", []*onnx.Node{relu("r1", "x", "a"), relu("r2", "x", "b"),
			{Name: "cat", OpType: "Concat", Inputs: []string{"a", "b"}, Outputs: []string{"y"},
				Attributes: []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: 1}}}},
			[3]string{"(concat 1 (relu ?a) (relu ?b))", "(relu (concat 1 ?a ?b))", "?a:2x4x5x5 ?b:2x4x5x5"},
			map[string]float64{"-> 1x16x64x64": 1e4, "-> 1x32x64x64": 1e-3}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, rt := tinyModel(t, []int{1, 16, 64, 64}, nil, []string{"y"}, c.nodes...)
			g, err := FromONNX(m, rt)
			if err != nil {
				t.Fatal(err)
			}
			stale := func(k OpKey) (float64, bool) {
				for suffix, ms := range c.stale {
					if k.Operator == "Relu" && strings.HasSuffix(k.Shapes, suffix) {
						return ms, true
					}
				}
				return 0, false
			}
			opt := DefaultOptions()
			opt.Cost, opt.MinGain = &Measured{Repeat: 3, Known: stale}, 0.005
			res, err := Optimize(context.Background(), g, shapedRuleSet(t, c.rule[0], c.rule[1], c.rule[2]), opt)
			if err != nil {
				t.Fatal(err)
			}
			conf := res.Confirmed
			if conf == nil || conf.Held != c.held || conf.Rounds != opt.ConfirmRounds || conf.Err != "" {
				t.Fatalf("confirmation %+v (cost %.3f -> %.3f ms), want held %v", conf, res.Before, res.After, c.held)
			}
			if unchanged := len(res.Applied) == 0 && res.After == res.Before && res.Graph == g; unchanged == c.held {
				t.Errorf("held %v, but the result has %d rules applied, cost %.3f -> %.3f ms", c.held, len(res.Applied), res.Before, res.After)
			}
			if last := res.Trace[len(res.Trace)-1].Best; last != res.After {
				t.Errorf("the best cost over time ends at %.3f ms, the result costs %.3f ms", last, res.After)
			}
			// Two of the same activation removed: twice its time, nothing added.
			if c.held && (conf.After != 0 || conf.Before <= 0 || res.AfterByOperator["relu"].Nodes != 1) {
				t.Errorf("confirmation %+v, after %v; want the time of two activations removed and nothing added", conf, res.AfterByOperator)
			}
			// A fresh cost model: this one's cache holds the confirmed times.
			opt.Cost, opt.ConfirmRounds = &Measured{Repeat: 3, Known: stale}, 0
			if res, err := Optimize(context.Background(), g, shapedRuleSet(t, c.rule[0], c.rule[1], c.rule[2]), opt); err != nil || res.Confirmed != nil || len(res.Applied) == 0 {
				t.Errorf("without confirmation: %v, confirmed %+v, %d rules applied", err, res.Confirmed, len(res.Applied))
			}
			_, rt2 := written(t, res.Graph)
			assertSameOutputs(t, rt, rt2)
		})
	}
}
