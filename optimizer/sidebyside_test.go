package optimizer

import (
	"math"
	"testing"
)

func TestRelDiff(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := []struct {
		want, got []float32
		diff      float64
	}{
		{[]float32{1, 2}, []float32{1, 2}, 0},
		{[]float32{2, -4}, []float32{2, -4.004}, 0.001},
		{[]float32{0, 0}, []float32{0, 1e-9}, 1},
		{[]float32{nan, 1}, []float32{nan, 1}, 0},
		{[]float32{nan, 1}, []float32{0, 1}, 1},
		{[]float32{inf, 1}, []float32{inf, 1}, 0},
	}
	for _, c := range cases {
		if d := relDiff(c.want, c.got); math.Abs(d-c.diff) > 1e-6 {
			t.Errorf("relDiff(%v, %v) = %g, want %g", c.want, c.got, d, c.diff)
		}
	}
}
