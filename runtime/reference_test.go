package runtime

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func TestMultiIndex(t *testing.T) {
	cases := []struct {
		flat  int
		shape []int
		want  []int
	}{
		{0, []int{2, 3}, []int{0, 0}},
		{5, []int{2, 3}, []int{1, 2}},
		{617, []int{1, 1000}, []int{0, 617}},
		{23, []int{2, 3, 4}, []int{1, 2, 3}},
		{0, nil, []int{}},
	}
	for _, c := range cases {
		if got := multiIndex(c.flat, c.shape); !slices.Equal(got, c.want) {
			t.Errorf("multiIndex(%d, %v) = %v, want %v", c.flat, c.shape, got, c.want)
		}
	}
}

func TestTolerance(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	tol := Tolerance{RTol: DefaultRTol, ATol: DefaultATol}
	for _, c := range []struct {
		got, want float32
		ok        bool
	}{
		{1, 1, true}, {1.0009, 1, true}, {1.0011, 1, false}, {1e-6, 0, true}, {2e-5, 0, false},
		{nan, nan, true}, {nan, 1, false}, {1, nan, false}, {inf, inf, true}, {inf, -inf, false},
	} {
		if tol.allows(c.got, c.want) != c.ok {
			t.Errorf("allows(%g, %g) = %v", c.got, c.want, !c.ok)
		}
	}
}

// The first element out of tolerance is named, and all are counted.
func TestFirstMismatch(t *testing.T) {
	want := &Tensor{Shape: []int{2, 2}, Data: []float32{1, 2, 3, 4}}
	got := &Tensor{Shape: []int{2, 2}, Data: []float32{1, 2.5, 3, 5}}
	err := firstMismatch("y", got, want, Tolerance{RTol: 1e-3})
	var m *Mismatch
	if !errors.As(err, &m) || m.Index != 1 || !slices.Equal(m.At, []int{0, 1}) || m.Got != 2.5 || m.Want != 2 || m.Differ != 2 || m.Total != 4 {
		t.Fatalf("mismatch %+v (%v)", m, err)
	}
	const text = `output "y" differs from its reference at flat index 1, index [0 1]: got 2.5, want 2 (rtol 0.001, atol 0); 2 of 4 elements differ; relative error of the output 0.2`
	if err.Error() != text {
		t.Errorf("message %q, want %q", err, text)
	}
	if err := firstMismatch("y", want, want, Tolerance{}); err != nil {
		t.Errorf("equal tensors: %v", err)
	}
}
