package fingerprint

import (
	"math/rand/v2"
	"testing"

	"rulebook/rules"
)

func TestCombineIgnoresOutputOrder(t *testing.T) {
	in := Inputs{Seed: 7}
	var hs []uint64
	for i, s := range []rules.Shape{rules.NewShape(2, 4), rules.NewShape(4, 4), rules.NewShape(2, 4, 5, 5), rules.NewShape()} {
		hs = append(hs, Tensor(in.Int(i, s)))
	}
	want := Combine(hs)
	r := rand.New(rand.NewPCG(1, 2))
	for k := 0; k < 50; k++ {
		p := append([]uint64(nil), hs...)
		r.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
		if got := Combine(p); got != want {
			t.Fatalf("permutation %v changed the fingerprint", p)
		}
	}
	if Combine(hs[:3]) == want {
		t.Error("dropping an output left the fingerprint unchanged")
	}
}

func TestTensorHashCoversShapeSplitAndValues(t *testing.T) {
	in := Inputs{Seed: 7}
	base := in.Int(0, rules.NewShape(2, 4))
	h := Tensor(base)
	reshaped := &rules.IntTensor{Shape: rules.NewShape(4, 2), Data: base.Data}
	split := &rules.IntTensor{Shape: base.Shape, Data: base.Data}
	split.Shape.Split[0] = &rules.SplitTree{LeftSize: 1}
	changed := &rules.IntTensor{Shape: base.Shape, Data: append([]uint32(nil), base.Data...)}
	changed.Data[3]++
	for name, other := range map[string]*rules.IntTensor{"shape": reshaped, "split history": split, "values": changed} {
		if Tensor(other) == h {
			t.Errorf("hash ignores the %s", name)
		}
	}
}

func TestInputsAreDeterministic(t *testing.T) {
	s := rules.NewShape(2, 4, 5, 5)
	a, b := Inputs{Seed: 3}, Inputs{Seed: 3}
	if Tensor(a.Int(5, s)) != Tensor(b.Int(5, s)) {
		t.Error("same seed and index gave different integers")
	}
	if Tensor(a.Int(5, s)) == Tensor(a.Int(6, s)) {
		t.Error("different inputs share values")
	}
	f := a.Float(Draw(16), 2, s)
	sign := f.Data[0] > 0
	for _, v := range f.Data {
		if (v > 0) != sign || v == 0 {
			t.Fatal("one-signed draw mixes signs")
		}
	}
}

// TestDrawsAreRandsOwn: the draws taken from the PCG directly are the ones
// rand.Rand gives, so that no fingerprint, release or counterexample moved
// when they stopped going through Rand.
func TestDrawsAreRandsOwn(t *testing.T) {
	s := rules.NewShape(3, 7, 11)
	in := Inputs{Seed: 9}
	r := rand.New(rand.NewPCG(9, 1<<32|4))
	for i, v := range in.Int(4, s).Data {
		if want := uint32(r.Uint64N(rules.Prime)); v != want {
			t.Fatalf("integer %d: %d, rand.Rand gives %d", i, v, want)
		}
	}
	for stream := uint64(0); stream < 2; stream++ {
		r := rand.New(rand.NewPCG(9, (2+stream)<<32|4))
		sign := 1.0
		if stream == 1 && r.IntN(2) == 0 {
			sign = -1
		}
		for i, v := range in.Float(stream, 4, s).Data {
			var want float64
			if stream == 0 {
				want = 2*r.Float64() - 1
			} else {
				want = sign * (0.1 + 0.9*r.Float64())
			}
			if v != want {
				t.Fatalf("stream %d float %d: %g, rand.Rand gives %g", stream, i, v, want)
			}
		}
	}
}
