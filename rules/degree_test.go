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

	text, err := rules.NewText(rules.All(), "(linear none (partition 0 d ?a) (replicate d ?b))", "(partition 0 d (linear none ?a ?b))", "?a:6x6x6+copy2 ?b:6x6", "")
	if err != nil {
		t.Fatal(err)
	}
	shapes, err := text.Rule().InputShapesAtDegree(8, 24)
	if err != nil || shapes[0].String() != "24x24x24+copy8" || shapes[1].String() != "24x24" {
		t.Errorf("at 8: %v, %v", shapes, err)
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

// TestParallelPool: every size is divisible by every degree, the pool is
// written at degree 2 and taken at others.
func TestParallelPool(t *testing.T) {
	pool := rules.ParallelPool([]int{2, 3})
	if got := pool.String(); got != "x:6x6x6×3 w:6x6×2 xs:6x6x6+sum2×2 xc:6x6x6+copy2×1" {
		t.Errorf("pool %s", got)
	}
	at3, err := pool.AtDegree(3)
	if err != nil || at3.Classes[2].Shape.String() != "6x6x6+sum3" || at3.Classes[3].Shape.String() != "6x6x6+copy3" {
		t.Errorf("at 3: %v, %v", at3, err)
	}
	if got := rules.ParallelPool([]int{2}).Classes[0].Shape.String(); got != "4x4x4" {
		t.Errorf("degree 2 alone: activations %s, expected 4x4x4", got)
	}
	if got := rules.ParallelPool([]int{3, 4}).Classes[0].Shape.String(); got != "12x12x12" {
		t.Errorf("degrees 3, 4: activations %s, expected 12x12x12", got)
	}
	if !rules.Parallel().HasDegreeParams() || rules.Default().HasDegreeParams() {
		t.Error("HasDegreeParams: expected the parallel set only")
	}
}
