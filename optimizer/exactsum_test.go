package optimizer

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// exactSum's total is the exact sum of what was added, less what was
// subtracted, rounded once to nearest (ties to even), as math/big
// computes it: on random floats of every magnitude, subnormals, sums
// near overflow and sums that cancel included, in any order, normalized
// in between or not.
func TestExactSumRoundsOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 30000 {
		xs := randomFloats(r)
		var s exactSum
		want := new(big.Float).SetPrec(4200) // holds any sum of float64s exactly
		for _, x := range xs {
			s.add(x)
			want.Add(want, new(big.Float).SetFloat64(x))
			if r.IntN(8) == 0 {
				s.normalize()
			}
		}
		for _, x := range xs[:r.IntN(len(xs)+1)] {
			if r.IntN(2) == 0 {
				s.sub(x)
				want.Sub(want, new(big.Float).SetFloat64(x))
			}
		}
		w, _ := want.Float64()
		if got := s.round(); math.Float64bits(got) != math.Float64bits(w) {
			t.Fatalf("trial %d: %v less some is %v (%x), want %v (%x)", trial, xs, got, math.Float64bits(got), w, math.Float64bits(w))
		}
	}
}

// The total does not depend on the order of the additions, and
// subtracting everything added leaves +0.
func TestExactSumOrderFree(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 10000 {
		xs := randomFloats(r)
		var s, shuffled exactSum
		for _, x := range xs {
			s.add(x)
		}
		r.Shuffle(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
		for _, x := range xs {
			shuffled.add(x)
		}
		if a, b := s.round(), shuffled.round(); math.Float64bits(a) != math.Float64bits(b) {
			t.Fatalf("trial %d: %v in two orders: %v and %v", trial, xs, a, b)
		}
		for _, x := range xs {
			s.sub(x)
		}
		if z := s.round(); math.Float64bits(z) != 0 {
			t.Fatalf("trial %d: %v less itself is %v", trial, xs, z)
		}
	}
}

func TestExactSumEdges(t *testing.T) {
	tiny, huge := math.SmallestNonzeroFloat64, math.MaxFloat64
	inf := math.Inf(1)
	cases := []struct {
		add, sub []float64
		want     float64
	}{
		{nil, nil, 0},
		{[]float64{1, -1}, nil, 0},
		{[]float64{huge, huge}, nil, inf},
		{[]float64{-huge, -huge}, nil, -inf},
		{[]float64{huge, huge, -huge}, nil, huge}, // a float sum overflows on the way
		{[]float64{1, 0x1p-53}, nil, 1},           // a tie, to even
		{[]float64{1, 0x1p-53, 0x1p-300}, nil, 1 + 0x1p-52},
		{[]float64{1 + 0x1p-52, 0x1p-53}, nil, 1 + 0x1p-51},
		{[]float64{tiny, tiny, tiny}, nil, 3 * tiny},
		{[]float64{0x1p-1022, -tiny}, nil, 0x1p-1022 - tiny},
		{[]float64{1e300, 1, -1e300}, nil, 1},
		{[]float64{inf, 1}, nil, inf},
		{[]float64{inf, -inf}, nil, math.NaN()},
		{[]float64{inf, 1}, []float64{inf}, 1},
		{[]float64{math.NaN(), 2}, []float64{math.NaN()}, 2},
	}
	for _, c := range cases {
		var s exactSum
		for _, x := range c.add {
			s.add(x)
		}
		for _, x := range c.sub {
			s.sub(x)
		}
		if got := s.round(); math.Float64bits(got) != math.Float64bits(c.want) && !(math.IsNaN(got) && math.IsNaN(c.want)) {
			t.Errorf("%v less %v: %v, want %v", c.add, c.sub, got, c.want)
		}
	}
}

// randomFloats draws up to 40 finite floats of one of several kinds.
func randomFloats(r *rand.Rand) []float64 {
	xs := make([]float64, 1+r.IntN(40))
	kind, center := r.IntN(5), r.IntN(2098)-1074
	for i := range xs {
		var x float64
		switch kind {
		case 0: // any finite float
			x = math.Float64frombits(r.Uint64()&^(0x7ff<<52) | uint64(r.IntN(0x7ff))<<52)
		case 1: // magnitudes near one another, so that digits carry and cancel
			x = math.Ldexp(float64(r.Uint64()>>11), min(center+r.IntN(120)-60-52, 970))
		case 2: // subnormals and the smallest normals
			x = math.Float64frombits(r.Uint64() & (1<<53 - 1))
		case 3: // near overflow
			x = math.Float64frombits(r.Uint64()&(1<<52-1) | uint64(0x7f0+r.IntN(15))<<52)
		default: // prices in milliseconds
			x = math.Ldexp(1+r.Float64(), r.IntN(30)-20)
		}
		if r.IntN(2) == 0 {
			x = -x
		}
		if i > 0 && r.IntN(6) == 0 {
			x = -xs[r.IntN(i)] // cancels an earlier one
		}
		xs[i] = x
	}
	return xs
}
