package rules_test

import (
	"math/rand/v2"
	"testing"

	"rulebook/rules"
)

// TestFlexFlowReadingValues checks FlexFlow's replicate and reduce against
// their definitions, element by element: replicate concatenates copies
// along its dimension, reduce adds that dimension's equal slices, and both
// scale the dimension's degree with its size.
func TestFlexFlowReadingValues(t *testing.T) {
	reg := rules.FlexFlowReading()
	x := rules.NewTensor[float64](rules.NewShape(2, 3, 4))
	for i := range x.Data {
		x.Data[i] = float64(i + 1)
	}
	at := func(t *rules.FloatTensor, i, j, k int) float64 {
		return t.Data[(i*t.Shape.Dims[1]+j)*t.Shape.Dims[2]+k]
	}
	for dim := 0; dim < 3; dim++ {
		g, err := rules.ParseGraph(reg, "(ff_replicate "+string(rune('0'+dim))+" 2 ?a)")
		if err != nil {
			t.Fatal(err)
		}
		out, err := rules.Evaluate(g, rules.FloatKernelOf, []*rules.FloatTensor{x})
		if err != nil {
			t.Fatal(err)
		}
		y := out[0]
		if y.Shape.Dims[dim] != 2*x.Shape.Dims[dim] || y.Shape.Degree(dim) != 2 {
			t.Fatalf("replicate along %d: %s", dim, y.Shape)
		}
		for i := range y.Shape.Dims[0] {
			for j := range y.Shape.Dims[1] {
				for k := range y.Shape.Dims[2] {
					c := [3]int{i, j, k}
					c[dim] %= x.Shape.Dims[dim]
					if at(y, i, j, k) != at(x, c[0], c[1], c[2]) {
						t.Fatalf("replicate along %d: element (%d, %d, %d) is %g", dim, i, j, k, at(y, i, j, k))
					}
				}
			}
		}
		g, err = rules.ParseGraph(reg, "(ff_reduce "+string(rune('0'+dim))+" 2 ?a)")
		if err != nil {
			t.Fatal(err)
		}
		out, err = rules.Evaluate(g, rules.FloatKernelOf, []*rules.FloatTensor{y})
		if err != nil {
			t.Fatal(err)
		}
		z := out[0]
		if !z.Shape.SameDims(x.Shape) {
			t.Fatalf("reduce along %d: %s", dim, z.Shape)
		}
		for i := range z.Data {
			if z.Data[i] != 2*x.Data[i] {
				t.Fatalf("reduce of two copies along %d: element %d is %g, want %g", dim, i, z.Data[i], 2*x.Data[i])
			}
		}
	}
	// Unity's Fig. 11b holds in this reading: a + b is the reduce of their
	// concatenation.
	g, err := rules.ParseRule(reg, "(ewadd ?a ?b) => (ff_reduce 0 2 (partition 0 2 (concat 0 ?a ?b)))")
	if err != nil {
		t.Fatal(err)
	}
	b := rules.NewTensor[float64](x.Shape)
	for i := range b.Data {
		b.Data[i] = float64(3 * i)
	}
	l, err1 := rules.Evaluate(&g.Src, rules.FloatKernelOf, []*rules.FloatTensor{x, b})
	r, err2 := rules.Evaluate(&g.Dst, rules.FloatKernelOf, []*rules.FloatTensor{x, b})
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	for i := range l[0].Data {
		if l[0].Data[i] != r[0].Data[i] {
			t.Fatalf("element %d: %g against %g", i, l[0].Data[i], r[0].Data[i])
		}
	}
	// A reduce over a dimension that is not cut is refused.
	if _, err := rules.Evaluate(mustGraph(t, reg, "(ff_reduce 1 2 ?a)"), rules.FloatKernelOf, []*rules.FloatTensor{randomTensor(rand.New(rand.NewPCG(1, 1)), "4x4x4")}); err == nil {
		t.Fatal("reduce over a whole dimension accepted")
	}
}

func mustGraph(t *testing.T, reg *rules.Registry, text string) *rules.Graph {
	t.Helper()
	g, err := rules.ParseGraph(reg, text)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
