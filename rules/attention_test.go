package rules

import (
	"math"
	"slices"
	"testing"
)

// TestAttention: one head, one query (1, 0) against keys (1, 0) and
// (0, 1) with values (1, 2) and (3, 4). The float weights are the softmax
// of the scores scaled by 1/√2; the exact ones the squared scores
// normalised, (1, 0). A cut of the heads or of the query rows leaves the
// values as they are; a cut of the keys' rows is refused.
func TestAttention(t *testing.T) {
	reg := All()
	softmax, _ := reg.Lookup(NameAttnSoftmax)
	mix, _ := reg.Lookup(NameAttnMix)
	q := []float64{1, 0}
	k := []float64{1, 0, 0, 1}
	v := []float64{1, 2, 3, 4}
	run := func(qs, ks, vs Shape) []float64 {
		w, err := Eval(softmax, softmax.FloatKernel, nil, []*FloatTensor{{Shape: qs, Data: q}, {Shape: ks, Data: k}}, Shape{})
		if err != nil {
			t.Fatal(err)
		}
		y, err := Eval(mix, mix.FloatKernel, nil, []*FloatTensor{w[0], {Shape: vs, Data: v}}, Shape{})
		if err != nil {
			t.Fatal(err)
		}
		return y[0].Data
	}
	qs, ks := NewShape(1, 1, 1, 2), NewShape(1, 1, 2, 2)
	got := run(qs, ks, ks)
	a := math.Exp(1/math.Sqrt2) / (math.Exp(1/math.Sqrt2) + 1)
	want := []float64{a*1 + (1-a)*3, a*2 + (1-a)*4}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("float attention: %v, want %v", got, want)
		}
	}

	ints := func(xs []float64) []uint32 {
		out := make([]uint32, len(xs))
		for i, x := range xs {
			out[i] = uint32(x)
		}
		return out
	}
	w, err := Eval(softmax, softmax.IntKernel, nil, []*IntTensor{{Shape: qs, Data: ints(q)}, {Shape: ks, Data: ints(k)}}, Shape{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w[0].Data, []uint32{1, 0}) {
		t.Errorf("exact weights: %v, want [1 0]", w[0].Data)
	}

	rowsCut := NewShape(1, 1, 2, 2)
	rowsCut.Degrees[2] = 2
	if _, err := softmax.InferShapes(nil, []Shape{withCopy(qs, 2), rowsCut}); err == nil {
		t.Error("keys cut by rows were taken")
	}
	// Two heads, the second with the query (0, 1); cut in 2, as Megatron
	// cuts them, the values are those of the heads whole.
	q, k, v = []float64{1, 0, 0, 1}, slices.Concat(k, k), slices.Concat(v, v)
	q2, k2 := NewShape(1, 2, 1, 2), NewShape(1, 2, 2, 2)
	whole := run(q2, k2, k2)
	if got := run(withDegree(q2, 1, 2), withDegree(k2, 1, 2), withDegree(k2, 1, 2)); !slices.Equal(got, whole) {
		t.Errorf("heads cut in 2: %v, whole %v", got, whole)
	}
	if whole[2] == whole[0] {
		t.Errorf("the two heads agree (%v): the check cannot tell them apart", whole)
	}
}
