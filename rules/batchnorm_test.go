package rules_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"rulebook/rules"
)

// TestBatchNormLayouts: batch normalisation takes its channels cut and
// copies, and each channel block it computes is the normalisation of
// that block on one device; a cut of the batch or the image, and partial
// sums, are refused.
func TestBatchNormLayouts(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct{ in, want, refused string }{
		{in: "4x6/2x3x3", want: "4x6/2x3x3"},
		{in: "4x6/3x3x3+copy2", want: "4x6/3x3x3+copy2"},
		{in: "4x6x3x3+copy3", want: "4x6x3x3+copy3"},
		{in: "4/2x6x3x3", refused: "dimension 0 cut"},
		{in: "4x6x4/2x3", refused: "dimension 2 cut"},
		{in: "4x6x3x4/2", refused: "dimension 3 cut"},
		{in: "4x6x3x3+sum2", refused: "partial sums"},
	} {
		t.Run(c.in, func(t *testing.T) {
			x := randomTensor(r, c.in)
			got, err := evalFloat(t, "(batchnorm ?a)", []*rules.FloatTensor{x})
			if c.refused != "" {
				if err == nil || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("got %v, want a refusal with %q", err, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Shape.String() != c.want {
				t.Fatalf("laid out as %s, want %s", got.Shape, c.want)
			}
			blocks := x.Shape.Degree(1)
			for l := range blocks {
				alone, err := evalFloat(t, "(batchnorm ?a)", []*rules.FloatTensor{channelBlock(piece(x, 0), l, blocks)})
				if err != nil {
					t.Fatal(err)
				}
				mine := channelBlock(piece(got, 0), l, blocks)
				for e := range alone.Data {
					if math.Abs(alone.Data[e]-mine.Data[e]) > 1e-12 {
						t.Fatalf("channel block %d, element %d: %g, alone %g", l, e, mine.Data[e], alone.Data[e])
					}
				}
			}
		})
	}
}

// TestBatchNormValues holds both kernels to what they claim, computed
// another way. Each float channel comes out with mean 0 and variance
// v/(v+ε) for its input's variance v. Each exact channel is its centred
// values divided by their sum of squares: with c = n·x − Σx (n times the
// centred values, no inverse needed), out·Σc² = n·c. A batch half
// normalised on its own differs from that half of the whole: the ghost
// normalisation a batch cut would compute.
func TestBatchNormValues(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	x := randomTensor(r, "4x3x2x5")
	y, err := evalFloat(t, "(batchnorm ?a)", []*rules.FloatTensor{x})
	if err != nil {
		t.Fatal(err)
	}
	for ch := range 3 {
		_, vx := moments(channelOf(x, ch))
		my, vy := moments(channelOf(y, ch))
		if want := vx / (vx + 1e-5); math.Abs(my) > 1e-12 || math.Abs(vy-want) > 1e-12 {
			t.Errorf("channel %d: mean %g and variance %g, want 0 and %g", ch, my, vy, want)
		}
	}

	exact := rules.NewTensor[uint32](x.Shape)
	for i := range exact.Data {
		exact.Data[i] = r.Uint32N(rules.Prime)
	}
	ey, err := evalWith(t, "(batchnorm ?a)", rules.IntKernelOf, []*rules.IntTensor{exact})
	if err != nil {
		t.Fatal(err)
	}
	var m rules.Mod
	for ch := range 3 {
		in, out := channelOf(exact, ch), channelOf(ey, ch)
		sum := uint32(0)
		for _, v := range in {
			sum = m.Add(sum, v)
		}
		n := uint32(len(in))
		c := make([]uint32, len(in))
		squares := uint32(0)
		for i, v := range in {
			c[i] = m.Add(m.Mul(v, n), (rules.Prime-sum)%rules.Prime)
			squares = m.Add(squares, m.Mul(c[i], c[i]))
		}
		for i := range in {
			if got, want := m.Mul(out[i], squares), m.Mul(n, c[i]); got != want {
				t.Fatalf("exact channel %d, value %d: out·Σc² = %d, want n·c = %d", ch, i, got, want)
			}
		}
	}

	half := rules.NewTensor[float64](rules.NewShape(2, 3, 2, 5))
	copy(half.Data, x.Data[:half.Shape.Size()])
	ghost, err := evalFloat(t, "(batchnorm ?a)", []*rules.FloatTensor{half})
	if err != nil {
		t.Fatal(err)
	}
	if differ := maxDiff(channelOf(ghost, 0), channelOf(y, 0)[:20]); differ < 1e-3 {
		t.Errorf("a batch half normalised alone equals its half of the whole (difference %g)", differ)
	}
}

// channelOf lists channel ch of an NCHW tensor, batch by batch.
func channelOf[T any](x *rules.Tensor[T], ch int) []T {
	d := x.Shape.DimList()
	plane := d[2] * d[3]
	var out []T
	for b := range d[0] {
		start := (b*d[1] + ch) * plane
		out = append(out, x.Data[start:start+plane]...)
	}
	return out
}

// moments are the mean and the biased variance.
func moments(v []float64) (mean, variance float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	for _, x := range v {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(v))
}

func maxDiff(a, b []float64) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
	}
	return d
}
