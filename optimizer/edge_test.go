package optimizer

import (
	"context"
	"errors"
	"slices"
	"testing"

	"rulebook/onnx"
	"rulebook/rewrite"
	"rulebook/rules"
	"rulebook/runtime"
	"rulebook/version"
)

// tinyModel builds an ONNX model from nodes over a float input and
// float initializers, and loads it with the runtime.
func tinyModel(t *testing.T, input []int, weights map[string][]int, outputs []string, nodes ...*onnx.Node) (*onnx.Model, *runtime.Model) {
	t.Helper()
	g := &onnx.Graph{Name: "tiny", Nodes: nodes, Inputs: []*onnx.ValueInfo{valueInfo("x", input)}}
	seed := 1
	for name, shape := range weights {
		w := runtime.NewTensor(shape...)
		for i := range w.Data {
			seed = seed*1103515245 + 12345
			w.Data[i] = float32(seed%2000)/1000 - 1
		}
		g.Initializers = append(g.Initializers, floatTensor(name, w))
	}
	for _, o := range outputs {
		g.Outputs = append(g.Outputs, &onnx.ValueInfo{Name: o, IsTensor: true, ElemType: onnx.Float})
	}
	return reload(t, &onnx.Model{IRVersion: 8, OpsetImports: []onnx.OperatorSetID{{Version: 13}}, Graph: g})
}

// rewrites applies every rewrite of one rule once, keeping the results that
// type-check, as the search does.
func rewrites(t *testing.T, g *Graph, rule string) []*Graph {
	t.Helper()
	r, err := rules.ParseRule(rules.Default(), rule)
	if err != nil {
		t.Fatal(err)
	}
	var out []*Graph
	rewrite.Neighbours(&g.G, rewrite.Both(r, 0), func(_ *rewrite.Rewrite, _ *rewrite.Match, next *rules.Graph) bool {
		h := g.with(next)
		if h.Infer() == nil {
			out = append(out, h)
		}
		return true
	})
	return out
}

// A multi-output rule merges two matrix products that share an operand
// into one product of concatenated weights and a split; the rewritten
// model computes the same two outputs.
func TestMultiOutputRewrite(t *testing.T) {
	m, rt := tinyModel(t, []int{8, 16}, map[string][]int{"w1": {16, 16}, "w2": {16, 16}}, []string{"y1", "y2"},
		&onnx.Node{Name: "mm1", OpType: "MatMul", Inputs: []string{"x", "w1"}, Outputs: []string{"y1"}},
		&onnx.Node{Name: "mm2", OpType: "MatMul", Inputs: []string{"x", "w2"}, Outputs: []string{"y2"}})
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	got := rewrites(t, g, "(let ((%0 (matmul ?a (concat 1 ?b ?c)))) (outputs (split0 1 %0) (split1 1 %0))) => (outputs (matmul ?a ?b) (matmul ?a ?c))")
	var merged *Graph
	for _, h := range got {
		if ops := h.G.OpNames(); len(h.G.Nodes) == 3 && ops[0] == "concat" {
			merged = h
		}
	}
	if merged == nil {
		t.Fatalf("no merged product among %d rewrites", len(got))
	}
	_, rt2 := written(t, merged)
	assertSameOutputs(t, rt, rt2)
}

// A rule applies only where the shapes fit: enlarging a kernel to 3×3
// type-checks on a 1×1 kernel, not on a 5×5 one.
func TestRuleShapesMustFit(t *testing.T) {
	m, rt := tinyModel(t, []int{1, 4, 8, 8}, map[string][]int{"k1": {4, 4, 1, 1}, "k5": {4, 4, 5, 5}}, []string{"y1", "y5"},
		&onnx.Node{Name: "c1", OpType: "Conv", Inputs: []string{"x", "k1"}, Outputs: []string{"y1"}},
		&onnx.Node{Name: "c5", OpType: "Conv", Inputs: []string{"x", "k5"}, Outputs: []string{"y5"},
			Attributes: []*onnx.Attribute{intsAttr("pads", 2, 2, 2, 2)}})
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	if ops := g.G.OpNames(); len(ops) != 1 || ops[0] != "conv2d" {
		t.Fatalf("mapped to %v, want two conv2d", ops)
	}
	got := rewrites(t, g, "(conv2d 1 same none 1 ?a (enlarge 3 ?b)) => (conv2d 1 same none 1 ?a ?b)")
	if len(got) != 1 {
		t.Fatalf("%d rewrites type-check, want 1 (the 1×1 kernel only)", len(got))
	}
	for _, n := range got[0].G.Nodes {
		if n.Op.Name == "enlarge" && got[0].shape(n.Args[0])[2] != 1 {
			t.Errorf("enlarged a %v kernel", got[0].shape(n.Args[0]))
		}
	}
}

// Merging two products that share an operand would create a cycle when
// one product's result feeds the other (TASO Fig. 2.6): the merged node
// would read its own output. The rewrite is refused, and only that one.
func TestRewriteWouldCycle(t *testing.T) {
	m, rt := tinyModel(t, []int{16, 16}, map[string][]int{"w": {16, 16}}, []string{"u"},
		&onnx.Node{Name: "mm1", OpType: "MatMul", Inputs: []string{"x", "w"}, Outputs: []string{"z"}},
		&onnx.Node{Name: "relu", OpType: "Relu", Inputs: []string{"z"}, Outputs: []string{"r"}},
		&onnx.Node{Name: "mm2", OpType: "MatMul", Inputs: []string{"x", "r"}, Outputs: []string{"u"}})
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	const merge = "(let ((%0 (matmul ?a (concat 1 ?b ?c)))) (outputs (split0 1 %0) (split1 1 %0))) => (outputs (matmul ?a ?b) (matmul ?a ?c))"
	r, err := rules.ParseRule(rules.Default(), merge)
	if err != nil {
		t.Fatal(err)
	}
	matches, cycles := 0, 0
	rewrite.Find(&r.Dst, &g.G, func(match *rewrite.Match) bool {
		matches++
		if _, err := rewrite.Apply(&g.G, &r.Dst, &r.Src, match); errors.Is(err, rewrite.ErrCycle) {
			cycles++
		} else if err != nil {
			t.Errorf("apply: %v", err)
		}
		return true
	})
	if matches == 0 || cycles == 0 {
		t.Fatalf("%d matches of the two products, %d refused as cyclic; want the cross match refused", matches, cycles)
	}
	// A product may still merge with itself (both pattern products on
	// one node); the two different products never merge.
	for _, h := range rewrites(t, g, merge) {
		for _, n := range h.G.Nodes {
			if n.Op.Name == "concat" && n.Args[0] != n.Args[1] {
				t.Errorf("the two products merged: %s", rewrite.Term(&h.G))
			}
		}
	}
	rs := shapedRuleSet(t, "(let ((%0 (matmul ?a (concat 1 ?b ?c)))) (outputs (split0 1 %0) (split1 1 %0)))",
		"(outputs (matmul ?a ?b) (matmul ?a ?c))", "?a:4x4 ?b:4x4 ?c:4x4")
	opt := DefaultOptions()
	opt.Cost = products{}
	res, err := Optimize(context.Background(), g, rs, opt)
	if err != nil {
		t.Fatal(err)
	}
	if res.Unshaped != 0 || res.Explored < 2 {
		t.Errorf("%d graphs explored, %d rules without shapes", res.Explored, res.Unshaped)
	}
	_, rt2 := written(t, res.Graph)
	assertSameOutputs(t, rt, rt2)
}

// shapedRuleSet is a rule set of one rule found at the given input shapes.
func shapedRuleSet(t *testing.T, src, dst, inputs string) *version.Set {
	t.Helper()
	checked, err := rules.NewText(rules.Default(), src, dst, inputs, "")
	if err != nil {
		t.Fatal(err)
	}
	r, text := checked.Rule().Oriented()
	return &version.Set{Tag: "test", Rules: []*rules.Rule{r}, Texts: []string{text.String()}}
}

// A rule proved over matrices applies to batches of matrices only in its
// lifted form: products of a rank-3 activation by two weight matrices
// merge along axis 2 (columns), and the rule as proved, with axis 1, does
// not fire there.
func TestLiftedRule(t *testing.T) {
	m, rt := tinyModel(t, []int{1, 8, 16}, map[string][]int{"w1": {16, 16}, "w2": {16, 16}}, []string{"y1", "y2"},
		&onnx.Node{Name: "mm1", OpType: "MatMul", Inputs: []string{"x", "w1"}, Outputs: []string{"y1"}},
		&onnx.Node{Name: "mm2", OpType: "MatMul", Inputs: []string{"x", "w2"}, Outputs: []string{"y2"}})
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	rs := shapedRuleSet(t, "(let ((%0 (matmul ?a (concat 1 ?b ?c)))) (outputs (split0 1 %0) (split1 1 %0)))",
		"(outputs (matmul ?a ?b) (matmul ?a ?c))", "?a:2x4 ?b:4x4 ?c:4x4")
	vs, _, _ := variants(rs)
	if len(vs) != 2 || !vs[1].lifted || !slices.Equal(vs[1].ranks, []int{3, 3, 3}) {
		t.Fatalf("variants %+v, want the rule and its lift to rank 3", vs)
	}
	opt := DefaultOptions()
	opt.Budget, opt.Cost = 5, products{}
	res, err := Optimize(context.Background(), g, rs, opt)
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied[0] != 1 || res.After != 1 {
		t.Fatalf("applied %v, cost %.4f -> %.4f", res.Applied, res.Before, res.After)
	}
	for _, n := range res.Graph.G.Nodes {
		if (n.Op.Name == "concat" || n.Op.Name == "split") && n.Params[0] != 2 {
			t.Errorf("%s along axis %d, want 2", n.Op.Name, n.Params[0])
		}
	}
	_, rt2 := written(t, res.Graph)
	assertSameOutputs(t, rt, rt2)
}

// Which rules apply at which ranks: element-wise rules with concats on
// axes 0 and 1 everywhere, others at their own ranks or lifted.
func TestVariantRanks(t *testing.T) {
	cases := []struct {
		src, dst, inputs string
		ranks            [][]int // of each variant; nil: any rank
	}{
		{"(concat 1 (relu ?a) (relu ?b))", "(relu (concat 1 ?a ?b))", "?a:2x4 ?b:2x4", [][]int{nil}},
		{"(concat 2 (relu ?a) (relu ?b))", "(relu (concat 2 ?a ?b))", "?a:2x4x5x5 ?b:2x4x5x5", [][]int{{4, 4}}},
		{"(matmul (smul ?a ?b) ?c)", "(matmul ?a (smul ?c ?b))", "?a:2x4 ?b:scalar ?c:4x4", [][]int{{2, 0, 2}, {3, 0, 3}}},
		{"(conv2d 1 same none 1 ?a (enlarge 3 ?b))", "(conv2d 1 same none 1 ?a ?b)", "?a:2x4x5x5 ?b:4x4x3x3", [][]int{{4, 4}}},
	}
	for _, c := range cases {
		vs, _, _ := variants(shapedRuleSet(t, c.src, c.dst, c.inputs))
		var got [][]int
		for _, v := range vs {
			got = append(got, v.ranks)
		}
		if !slices.EqualFunc(got, c.ranks, slices.Equal) {
			t.Errorf("%s: variant ranks %v, want %v", c.src, got, c.ranks)
		}
	}
	// Without shapes, only a flat rule can say where it holds.
	vs, _, unshaped := variants(ruleSet(t, "(transpose (transpose ?a)) => ?a", "(relu (relu ?a)) => (relu ?a)"))
	if len(vs) != 1 || vs[0].rule != 1 || unshaped != 1 {
		t.Errorf("variants %+v and %d left out, want the flat rule and one left out", vs, unshaped)
	}
}

// products is a cost model that counts matrix products computed at
// inference, so that merging two is progress whatever it costs.
type products struct{}

func (products) Cost(g *Graph) float64 {
	weight := g.weightNodes()
	n := 0.0
	for i, node := range g.G.Nodes {
		if node.Op.Name == "matmul" && !weight[i] && g.liveNodes()[i] {
			n++
		}
	}
	return n
}

// Names the optimizer makes up never collide with the model's, even in a
// model it wrote before ("rb." names): a Gemm's transposed weight is
// folded into an initializer next to one the model already calls
// "rb.fold.0.0".
func TestMadeUpNamesAvoidTheModels(t *testing.T) {
	m, rt := tinyModel(t, []int{4, 8}, map[string][]int{"w": {8, 8}, "rb.fold.0.0": {8, 8}}, []string{"y", "z"},
		&onnx.Node{Name: "gemm", OpType: "Gemm", Inputs: []string{"x", "w"}, Outputs: []string{"y"},
			Attributes: []*onnx.Attribute{intAttr("transB", 1)}},
		&onnx.Node{Name: "mm", OpType: "MatMul", Inputs: []string{"x", "rb.fold.0.0"}, Outputs: []string{"z"}})
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	if g.prefix != "rb1" {
		t.Errorf("prefix %q, want rb1", g.prefix)
	}
	_, rt2 := written(t, g)
	assertSameOutputs(t, rt, rt2)
}

// Integer constants (Reshape's shapes in bert_base) are written back with
// their own type, not as floats.
func TestIntegerConstantsKeepTheirType(t *testing.T) {
	m, rt := load(t, "bert_base.onnx")
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	out, err := g.ToONNX()
	if err != nil {
		t.Fatal(err)
	}
	ints := 0
	for _, init := range out.Graph.Initializers {
		if init.DataType == onnx.Int64 {
			ints++
		}
	}
	if ints == 0 {
		t.Error("no int64 initializer written back; Reshape shapes became floats")
	}
}

// Gemm maps whatever its bias: a weight that broadcasts, or an activation
// of the product's shape.
func TestGemmBiases(t *testing.T) {
	m, rt := tinyModel(t, []int{4, 8}, map[string][]int{"w": {8, 8}, "c": {8}}, []string{"y", "z"},
		&onnx.Node{Name: "g1", OpType: "Gemm", Inputs: []string{"x", "w", "c"}, Outputs: []string{"y"}},
		&onnx.Node{Name: "r", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"rx"}},
		&onnx.Node{Name: "g2", OpType: "Gemm", Inputs: []string{"x", "w", "rx"}, Outputs: []string{"z"},
			Attributes: []*onnx.Attribute{intAttr("transB", 1)}})
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Opaque()) != 0 {
		t.Errorf("opaque nodes %v, want none", g.Opaque())
	}
	_, rt2 := written(t, g)
	assertSameOutputs(t, rt, rt2)
}

// A product of a batch by a weight matrix sees the weight with a batch
// axis, but writes it back at its own size: MatMul broadcasts batch axes.
func TestBatchedProductWeight(t *testing.T) {
	m, rt := tinyModel(t, []int{3, 4, 8}, map[string][]int{"v": {8, 16}}, []string{"u"},
		&onnx.Node{Name: "mm", OpType: "MatMul", Inputs: []string{"x", "v"}, Outputs: []string{"u"}})
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	decoded, rt2 := written(t, g)
	assertSameOutputs(t, rt, rt2)
	for _, init := range decoded.Graph.Initializers {
		if len(init.Dims) != 2 {
			t.Errorf("initializer %s written with dims %v, want the 8×16 matrix", init.Name, init.Dims)
		}
	}
}

// A Pad of zeros that only feeds an AveragePool is the pool's same
// padding; other pads (a non-zero value, or not SAME_UPPER's) stay opaque.
func TestPadBeforeAveragePool(t *testing.T) {
	padsOf := func(name string, v ...int64) *onnx.Node {
		return &onnx.Node{Name: name, OpType: "Constant", Outputs: []string{name}, Attributes: []*onnx.Attribute{{Name: "value", Type: onnx.AttrTensor,
			T: &onnx.Tensor{Name: name, Dims: []int64{int64(len(v))}, DataType: onnx.Int64, Int64Data: v}}}}
	}
	pool := func(in, out string) *onnx.Node {
		return &onnx.Node{Name: out, OpType: "AveragePool", Inputs: []string{in}, Outputs: []string{out},
			Attributes: []*onnx.Attribute{intsAttr("kernel_shape", 3, 3), intsAttr("strides", 1, 1), intAttr("count_include_pad", 0)}}
	}
	m, rt := tinyModel(t, []int{1, 4, 6, 6}, nil, []string{"y", "z"},
		padsOf("same", 0, 0, 1, 1, 0, 0, 1, 1), padsOf("other", 0, 0, 2, 2, 0, 0, 0, 0),
		&onnx.Node{Name: "p1", OpType: "Pad", Inputs: []string{"x", "same"}, Outputs: []string{"px"}},
		pool("px", "y"),
		&onnx.Node{Name: "p2", OpType: "Pad", Inputs: []string{"x", "other"}, Outputs: []string{"qx"}},
		pool("qx", "z"))
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	if ops := g.G.OpNames(); !slices.Equal(ops, []string{"onnx.Pad", "pool_avg"}) || g.Opaque()["Pad"] != 1 {
		t.Errorf("mapped to %v (opaque %v), want one same-padded pool_avg and the other Pad opaque", ops, g.Opaque())
	}
	decoded, rt2 := written(t, g)
	assertSameOutputs(t, rt, rt2)
	pads := 0
	for _, n := range decoded.Graph.Nodes {
		if n.OpType == "Pad" {
			pads++
		}
	}
	if pads != 1 {
		t.Errorf("%d Pad nodes written, want 1", pads)
	}
}

// A relu after a convolution costs nothing of its own, whether a rule
// fuses it into the convolution's activation or the runtime does.
func TestFusedActivationCost(t *testing.T) {
	m, rt := tinyModel(t, []int{1, 4, 8, 8}, map[string][]int{"w": {4, 4, 3, 3}}, []string{"y"},
		&onnx.Node{Name: "conv", OpType: "Conv", Inputs: []string{"x", "w"}, Outputs: []string{"c"},
			Attributes: []*onnx.Attribute{{Name: "pads", Type: onnx.AttrInts, Ints: []int64{1, 1, 1, 1}}}},
		&onnx.Node{Name: "relu", OpType: "Relu", Inputs: []string{"c"}, Outputs: []string{"y"}})
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	rs := shapedRuleSet(t, "(relu (conv2d 1 same none 1 ?a ?b))", "(conv2d 1 same relu 1 ?a ?b)", "?a:2x4x5x5 ?b:4x4x3x3")
	res, err := Optimize(context.Background(), g, rs, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	before := res.BeforeByOperator
	if before["conv2d"].Nodes != 1 || before["relu"].Nodes != 1 || before["relu"].Ms != 0 || res.After != res.Before {
		t.Fatalf("split before %v, cost %.6f -> %.6f; want the relu free and no gain from fusing it", before, res.Before, res.After)
	}
	fused := rewrites(t, g, "(relu (conv2d 1 same none 1 ?a ?b)) => (conv2d 1 same relu 1 ?a ?b)")
	if len(fused) != 1 || ByOperator(DefaultCPU(), fused[0])["conv2d+relu"].Ms != before["conv2d"].Ms {
		t.Fatalf("the fused convolution is not priced as the convolution alone: %v", fused)
	}
	_, rt2 := written(t, fused[0])
	assertSameOutputs(t, rt, rt2)
}
