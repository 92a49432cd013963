package rules_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"rulebook/rules"
)

// windowLayoutCase is one convolution or pooling on laid-out inputs: want
// is the output's layout, or refused a fragment of the reason.
type windowLayoutCase struct {
	name    string
	inputs  []string
	graph   string
	want    string
	refused string
}

// TestConvLayouts checks which layouts conv2d takes (docs/parallel.md)
// and that every piece it computes is the convolution of its operands'
// pieces.
func TestConvLayouts(t *testing.T) {
	conv := func(act, groups string) string {
		return "(conv2d 1 same " + act + " " + groups + " ?a ?b)"
	}
	cases := []windowLayoutCase{
		{name: "batch cut", inputs: []string{"4/2x6x5x5", "8x6x3x3+copy2"}, graph: conv("none", "1"), want: "4/2x8x5x5"},
		{name: "batch cut under relu", inputs: []string{"4/2x6x5x5", "8x6x3x3+copy2"}, graph: conv("relu", "1"), want: "4/2x8x5x5"},
		{name: "output-channel cut", inputs: []string{"4x6x5x5+copy2", "8/2x6x3x3"}, graph: conv("relu", "1"), want: "4x8/2x5x5"},
		{name: "batch and output-channel cuts", inputs: []string{"4/2x6x5x5+copy2", "8/2x6x3x3+copy2"}, graph: conv("none", "1"), want: "4/2x8/2x5x5"},
		{name: "input-channel cut", inputs: []string{"4x6/2x5x5", "8x6/2x3x3"}, graph: conv("none", "1"), want: "4x8x5x5+sum2"},
		{name: "input-channel cut in 3", inputs: []string{"4x6/3x5x5", "8x6/3x3x3"}, graph: conv("none", "1"), want: "4x8x5x5+sum3"},
		{name: "input-channel cut beside a batch cut", inputs: []string{"4/2x6/3x5x5", "8x6/3x3x3+copy2"}, graph: conv("none", "1"), want: "4/2x8x5x5+sum3"},
		{name: "partial sums in", inputs: []string{"4x6x5x5+sum2", "8x6x3x3+copy2"}, graph: conv("none", "1"), want: "4x8x5x5+sum2"},
		{name: "partial sums in the kernel", inputs: []string{"4x6x5x5+copy2", "8x6x3x3+sum2"}, graph: conv("none", "1"), want: "4x8x5x5+sum2"},
		{name: "partial sums and an input-channel cut", inputs: []string{"4x6/2x5x5+sum2", "8x6/2x3x3+copy2"}, graph: conv("none", "1"), want: "4x8x5x5+sum4"},
		{name: "copies kept", inputs: []string{"4x6x5x5+copy3", "8x6x3x3+copy3"}, graph: conv("relu", "1"), want: "4x8x5x5+copy3"},
		{name: "spatial cut under a 1x1 window", inputs: []string{"2x6x4/2x4/2", "8x6x1x1+copy4"}, graph: conv("none", "1"), want: "2x8x4/2x4/2"},
		{name: "depth-wise output-channel cut", inputs: []string{"2x6x5x5+copy2", "6/2x1x3x3"}, graph: conv("none", "dw"), want: "2x6/2x5x5"},
		{name: "grouped batch cut", inputs: []string{"4/2x12x5x5", "8x6x3x3+copy2"}, graph: conv("relu", "2"), want: "4/2x8x5x5"},
		{name: "input-channel cut under relu", inputs: []string{"4x6/2x5x5", "8x6/2x3x3"}, graph: conv("relu", "1"), refused: "relu activation on 2 partial sums"},
		{name: "partial sums under relu", inputs: []string{"4x6x5x5+sum2", "8x6x3x3+copy2"}, graph: conv("relu", "1"), refused: "relu activation on 2 partial sums"},
		{name: "spatial cut under a 3x3 window", inputs: []string{"2x6x4/2x4", "8x6x3x3+copy2"}, graph: conv("none", "1"), refused: "would need their neighbours' cells"},
		{name: "spatial cut at stride 2", inputs: []string{"2x6x4/2x4", "8x6x1x1+copy2"}, graph: "(conv2d 2 same none 1 ?a ?b)", refused: "would need their neighbours' cells"},
		{name: "kernel window cut", inputs: []string{"2x6x5x5", "8x6x3/3x3"}, graph: conv("none", "1"), refused: "kernel window cut"},
		{name: "input channels cut in one operand", inputs: []string{"4x6/2x5x5", "8x6x3x3+copy2"}, graph: conv("none", "1"), refused: "input channels cut in 2 and 1"},
		{name: "input-channel cut under groups", inputs: []string{"2x12/2x5x5", "8x6/2x3x3"}, graph: conv("none", "2"), refused: "under 2 groups"},
		{name: "batch cut, kernel not copied", inputs: []string{"4/2x6x5x5", "8x6x3x3"}, graph: conv("none", "1"), refused: "pieces do not pair up"},
		{name: "partial sums in both", inputs: []string{"4x6x5x5+sum2", "8x6x3x3+sum2"}, graph: conv("none", "1"), refused: "both operands hold partial sums"},
	}
	runWindowLayouts(t, cases)
}

// TestPoolLayouts checks which layouts the pools take and that each piece
// is the pool of the operand's piece.
func TestPoolLayouts(t *testing.T) {
	cases := []windowLayoutCase{
		{name: "average, batch cut", inputs: []string{"4/2x6x6x6"}, graph: "(pool_avg 3 1 same ?a)", want: "4/2x6x6x6"},
		{name: "max, channel cut with copies", inputs: []string{"4x6/3x6x6+copy2"}, graph: "(pool_max 3 1 same ?a)", want: "4x6/3x6x6+copy2"},
		{name: "average of partial sums", inputs: []string{"4x6x6x6+sum2"}, graph: "(pool_avg 3 1 same ?a)", want: "4x6x6x6+sum2"},
		{name: "max, non-straddling spatial cut", inputs: []string{"4x6x8/2x8"}, graph: "(pool_max 2 2 valid ?a)", want: "4x6x4/2x4"},
		{name: "average, non-straddling spatial cuts, same padding", inputs: []string{"4x6x8/2x8/2"}, graph: "(pool_avg 2 2 same ?a)", want: "4x6x4/2x4/2"},
		{name: "max of partial sums", inputs: []string{"4x6x6x6+sum2"}, graph: "(pool_max 3 1 same ?a)", refused: "max is not linear"},
		{name: "average, spatial cut under an overlapping window", inputs: []string{"4x6x6/2x6"}, graph: "(pool_avg 3 1 same ?a)", refused: "windows would straddle pieces"},
		{name: "max, window straddling a piece of odd extent", inputs: []string{"4x6x6x6/2"}, graph: "(pool_max 2 2 valid ?a)", refused: "windows would straddle pieces"},
		{name: "average, padded window", inputs: []string{"4x6x6/2x6"}, graph: "(pool_avg 3 3 sym ?a)", refused: "windows would straddle pieces"},
	}
	runWindowLayouts(t, cases)
}

// runWindowLayouts evaluates each case; for an accepted one it checks
// every partial sum against the operator run on one device over the
// operands' partial sum i restricted to input-channel block l (partial
// sum i·c + l of the result, docs/parallel.md's order of pieces), in both
// the float and the exact (modular) arithmetic, which the layout sweep
// and axioms check trust. Cuts and copies are blocks of the logical
// tensor, so a partial sum compares whole.
func runWindowLayouts(t *testing.T, cases []windowLayoutCase) {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := make([]*rules.FloatTensor, len(c.inputs))
			exact := make([]*rules.IntTensor, len(c.inputs))
			for i, s := range c.inputs {
				in[i] = randomTensor(r, s)
				exact[i] = rules.NewTensor[uint32](in[i].Shape)
				for e := range exact[i].Data {
					exact[i].Data[e] = r.Uint32()
				}
			}
			got, err := evalFloat(t, c.graph, in)
			if c.refused != "" {
				if err == nil || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("got %v, want a refusal with %q", err, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if got.Shape.String() != c.want {
				t.Fatalf("laid out as %s, want %s", got.Shape, c.want)
			}
			checkPieces(t, c.graph, rules.FloatKernelOf, in, got, func(a, b float64) bool { return math.Abs(a-b) <= 1e-9 })
			gotExact, err := evalWith(t, c.graph, rules.IntKernelOf, exact)
			if err != nil {
				t.Fatalf("exact arithmetic: %v", err)
			}
			checkPieces(t, c.graph, rules.IntKernelOf, exact, gotExact, func(a, b uint32) bool { return a == b })
		})
	}
}

// evalWith evaluates a one-output graph text with the given kernels.
func evalWith[T any](t *testing.T, text string, kernel func(*rules.Op) func([]int, []*rules.Tensor[T], []*rules.Tensor[T]), in []*rules.Tensor[T]) (*rules.Tensor[T], error) {
	t.Helper()
	g, err := rules.ParseGraph(rules.All(), text)
	if err != nil {
		t.Fatalf("parse %s: %v", text, err)
	}
	out, err := rules.Evaluate(g, kernel, in)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// checkPieces compares each partial sum of got with the operator on one
// device.
func checkPieces[T any](t *testing.T, graph string, kernel func(*rules.Op) func([]int, []*rules.Tensor[T], []*rules.Tensor[T]), in []*rules.Tensor[T], got *rules.Tensor[T], equal func(a, b T) bool) {
	t.Helper()
	blocks := in[0].Shape.Degree(1)
	if len(in) == 1 { // a pool: its channel cut is no contraction
		blocks = 1
	}
	sums := got.Shape.SumDegree() / blocks
	for i := range sums {
		for l := range blocks {
			plain := make([]*rules.Tensor[T], len(in))
			for k, x := range in {
				plain[k] = piece(x, i%x.Shape.SumDegree())
				if blocks > 1 {
					plain[k] = channelBlock(plain[k], l, blocks)
				}
			}
			want, err := evalWith(t, graph, kernel, plain)
			if err != nil {
				t.Fatalf("on one device: %v", err)
			}
			g := piece(got, i*blocks+l)
			for e := range want.Data {
				if !equal(g.Data[e], want.Data[e]) {
					t.Fatalf("partial sum %d, element %d: %v, on one device %v", i*blocks+l, e, g.Data[e], want.Data[e])
				}
			}
		}
	}
}

// piece is partial sum i of a parallel tensor as a tensor on one device.
func piece[T any](x *rules.Tensor[T], i int) *rules.Tensor[T] {
	s := x.Shape.Plain()
	n := s.Size()
	return &rules.Tensor[T]{Shape: s, Data: x.Data[i*n : (i+1)*n]}
}

// channelBlock copies block l of c along dimension 1 of an NCHW tensor
// (or an OIHW kernel's input channels).
func channelBlock[T any](x *rules.Tensor[T], l, c int) *rules.Tensor[T] {
	d := x.Shape.DimList()
	b := d[1] / c
	inner := d[2] * d[3]
	out := rules.NewTensor[T](rules.NewShape(d[0], b, d[2], d[3]))
	for n := range d[0] {
		src := x.Data[(n*d[1]+l*b)*inner : (n*d[1]+(l+1)*b)*inner]
		copy(out.Data[n*b*inner:(n+1)*b*inner], src)
	}
	return out
}
