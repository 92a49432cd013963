package rules_test

import (
	"strings"
	"testing"

	"rulebook/rules"
)

// TestShapesAtDegree: layouts written at degree 2 stand for powers of d,
// and a d-rule's inputs grow to a common multiple without losing their
// ratios.
func TestShapesAtDegree(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"6x6x6+sum2", "6x6x6+sum3"},
		{"12/4x6/2x6+copy2", "12/9x6/3x6+copy3"},
		{"6x6", "6x6"},
	} {
		s, err := rules.ParseDims(c.in)
		if err != nil {
			t.Fatal(err)
		}
		// The layout only: sizes are InputShapesAtDegree's business.
		got, err := rules.ShapeAtDegree(s, 2, 3)
		if err != nil || got.String() != c.want {
			t.Errorf("%s at 3 = %v, %v; want %s", c.in, got, err, c.want)
		}
	}
	s, _ := rules.ParseDims("6x6x6+sum3")
	if _, err := rules.ShapeAtDegree(s, 2, 4); err == nil || !strings.Contains(err.Error(), "not a power of degree 2") {
		t.Errorf("sum3 read at degree 2: got %v", err)
	}

	text, err := rules.NewText(rules.All(), "(ewadd (partition 0 d ?a) (partition 0 d ?b))", "(partition 0 d (ewadd ?a ?b))", "?a:4/2x4x4 ?b:4/2x4x4", "")
	if err != nil {
		t.Fatal(err)
	}
	// ?a is cut in d along 0 and partitioned again: d^2 must divide 24k.
	shapes, err := text.Rule().InputShapesAtDegree(3, 24)
	if err != nil || shapes[0].String() != "72/3x72x72" || shapes[1].String() != "72/3x72x72" {
		t.Errorf("at 3: %v, %v", shapes, err)
	}

	// An image and a kernel are not grown with the rest: the batch cut
	// needs a batch divisible by 3, not a 120×120 image.
	conv, err := rules.NewText(rules.All(), "(conv2d 1 same none 1 (partition 0 d ?a) (replicate d ?b))", "(partition 0 d (conv2d 1 same none 1 ?a ?b))", "?a:4x4x5x5 ?b:4x4x3x3", "")
	if err != nil {
		t.Fatal(err)
	}
	shapes, err = conv.Rule().InputShapesAtDegree(3, 24)
	if err != nil || shapes[0].String() != "12x4x5x5" || shapes[1].String() != "4x4x3x3" {
		t.Errorf("conv2d's batch cut at 3: %v, %v; want 12x4x5x5 and 4x4x3x3", shapes, err)
	}

	// d^4 pieces at d = 8 are within the layout limit; more are refused.
	big, err := rules.ParseDims("64/8x64/8x64+copy64")
	if err != nil || big.Pieces() != 4096 {
		t.Errorf("4096 pieces: %v, %v", big, err)
	}
	if _, err := rules.ParseDims("256/256x256/256x2+copy2"); err == nil || !strings.Contains(err.Error(), "exceed the limit") {
		t.Errorf("131072 pieces: got %v", err)
	}
}

// TestParallelPool: every size is divisible by the degree, every layout
// factor is the degree.
func TestParallelPool(t *testing.T) {
	if got := rules.ParallelPool(2).String(); got != "x:4x4x4×4 w:4x4×2 xs:4x4x4+sum2×2 xc:4x4x4+copy2×1 x0:4/2x4x4×2 x1:4x4/2x4×2 x2:4x4x4/2×2 w0:4/2x4×1 w1:4x4/2×1 wc:4x4+copy2×1 i:4x4x5x5×2 k:4x4x3x3×2 n:4×1" {
		t.Errorf("pool at 2: %s", got)
	}
	if got := rules.ParallelPool(3).String(); got != "x:6x6x6×4 w:6x6×2 xs:6x6x6+sum3×2 xc:6x6x6+copy3×1 x0:6/3x6x6×2 x1:6x6/3x6×2 x2:6x6x6/3×2 w0:6/3x6×1 w1:6x6/3×1 wc:6x6+copy3×1 i:6x6x5x5×2 k:6x6x3x3×2 n:6×1" {
		t.Errorf("pool at 3: %s", got)
	}
	if got := rules.ParallelPool(8).Classes[0].Shape.String(); got != "8x8x8" {
		t.Errorf("degree 8: activations %s, expected 8x8x8", got)
	}
	if !rules.Parallel().HasDegreeParams() || rules.Default().HasDegreeParams() {
		t.Error("HasDegreeParams: expected the parallel set only")
	}
}
