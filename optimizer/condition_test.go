package optimizer

import (
	"context"
	"testing"
	"time"

	"rulebook/onnx"
	"rulebook/rewrite"
	"rulebook/rules"
	"rulebook/version"
)

// poolThenConv is average pooling after a 1×1 convolution instead of
// before it, where the kernel is 1×1 (proved from pool-avg-conv1x1).
const poolThenConv = "(conv2d 1 same none 1 (pool_avg 3 1 same ?a) ?b) => (pool_avg 3 1 same (conv2d 1 same none 1 ?a ?b))"

// TestConditionCheckedAtEachMatch: the search moves an average pooling
// after a convolution that narrows 8 channels to 4 where the kernel is
// 1×1, and the rewritten model computes the same output; it refuses the
// same rewrite with a 3×3 kernel, where the shapes type-check but the rule
// is false. The rule without its condition shows the rewrite would be
// taken there.
func TestConditionCheckedAtEachMatch(t *testing.T) {
	cases := []struct {
		name   string
		kernel []int
		cond   string
		moved  bool
	}{
		{"1x1 kernel", []int{4, 8, 1, 1}, "(kernel ?b 1 1)", true},
		{"3x3 kernel", []int{4, 8, 3, 3}, "(kernel ?b 1 1)", false},
		{"3x3 kernel, rule without its condition", []int{4, 8, 3, 3}, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pad := c.kernel[2] / 2
			m, rt := tinyModel(t, []int{1, 8, 6, 6}, map[string][]int{"w": c.kernel}, []string{"y"},
				&onnx.Node{Name: "pool", OpType: "AveragePool", Inputs: []string{"x"}, Outputs: []string{"p"},
					Attributes: []*onnx.Attribute{intsAttr("kernel_shape", 3, 3), intsAttr("strides", 1, 1), intsAttr("pads", 1, 1, 1, 1), intAttr("count_include_pad", 1)}},
				&onnx.Node{Name: "conv", OpType: "Conv", Inputs: []string{"p", "w"}, Outputs: []string{"y"},
					Attributes: []*onnx.Attribute{intsAttr("pads", pad, pad, pad, pad)}})
			g, err := FromONNX(m, rt)
			if err != nil {
				t.Fatal(err)
			}
			text := poolThenConv
			if c.cond != "" {
				text += " if " + c.cond
			}
			checked, err := rules.ParseText(rules.Default(), text, "?a:1x8x6x6 ?b:4x8x1x1", "")
			if err != nil {
				t.Fatal(err)
			}
			r, oriented := checked.Rule().Oriented()
			rs := &version.Set{Tag: "test", Rules: []*rules.Rule{r}, Texts: []string{oriented.String()}}
			res, err := Optimize(context.Background(), g, rs, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			ops := res.Graph.G.OpNames()
			if moved := res.Applied[0] > 0; moved != c.moved {
				t.Fatalf("applied %v (graph %s), want moved %v", res.Applied, rules.FormatGraph(&res.Graph.G), c.moved)
			}
			if c.moved && c.cond != "" {
				if first := res.Graph.G.Nodes[0].Op.Name; first != "conv2d" || len(ops) != 2 {
					t.Errorf("graph %s, want the convolution first", rules.FormatGraph(&res.Graph.G))
				}
				_, rt2 := written(t, res.Graph)
				assertSameOutputs(t, rt, rt2)
			}
		})
	}
}

// TestConditionedRuleOnInception: in inception_v3 each branch pool (an
// average pooling feeding a 1×1 convolution that narrows the channels)
// takes the conditioned rule; the search moves every such pooling after
// its convolution, and the rewritten model computes the same outputs.
func TestConditionedRuleOnInception(t *testing.T) {
	m, rt := load(t, "inception_v3.onnx")
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	checked, err := rules.ParseText(rules.Default(), poolThenConv+" if (kernel ?b 1 1)", "?a:1x8x6x6 ?b:4x8x1x1", "")
	if err != nil {
		t.Fatal(err)
	}
	r, oriented := checked.Rule().Oriented()
	rs := &version.Set{Tag: "test", Rules: []*rules.Rule{r}, Texts: []string{oriented.String()}}
	sites := 0
	vs, rws, _ := variants(rs)
	rewrite.Neighbours(&g.G, rws, func(rw *rewrite.Rewrite, m *rewrite.Match, _ *rules.Graph) bool {
		if !rw.Reversed && g.fitsConditions(&vs[rw.Rule], m) {
			sites++
		}
		return true
	})
	opt := DefaultOptions()
	opt.Budget, opt.Timeout = 40, time.Minute
	res, err := Optimize(context.Background(), g, rs, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d branch-pool sites; applied %v; cost %.3f -> %.3f ms", sites, res.Applied, res.Before, res.After)
	if sites == 0 || res.Applied[0] != sites {
		t.Errorf("applied %v at %d sites", res.Applied, sites)
	}
	_, rt2 := written(t, res.Graph)
	assertSameOutputs(t, rt, rt2)
}
