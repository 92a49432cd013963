package checked

import (
	"errors"
	"math"
	"testing"
)

// TestMul: products that fit are exact; those that do not are ErrOverflow,
// at both signs and at the edges of int64.
func TestMul(t *testing.T) {
	for _, c := range []struct {
		a, b, want int64
		overflow   bool
	}{
		{0, math.MaxInt64, 0, false},
		{1 << 31, 1 << 31, 1 << 62, false},
		{1 << 32, 1 << 31, 0, true},
		{math.MaxInt64, 2, 0, true},
		{-1, math.MinInt64, 0, true},
		{math.MinInt64, -1, 0, true},
		{-3, 5, -15, false},
		{1 << 62, 2, 0, true},
		{math.MinInt64, 1, math.MinInt64, false},
	} {
		got, err := Mul(c.a, c.b)
		if c.overflow != errors.Is(err, ErrOverflow) || (!c.overflow && (err != nil || got != c.want)) {
			t.Errorf("Mul(%d, %d) = %d, %v; want %d, overflow %v", c.a, c.b, got, err, c.want, c.overflow)
		}
	}
	if _, err := Product(1<<20, 1<<20, 1<<20, 1<<4); !errors.Is(err, ErrOverflow) {
		t.Errorf("Product of 2^64: %v, want ErrOverflow", err)
	}
	if _, err := Add(math.MaxInt64, 1); !errors.Is(err, ErrOverflow) {
		t.Errorf("Add(MaxInt64, 1): %v, want ErrOverflow", err)
	}
	if _, err := MulInt(1<<31, 1<<31); err != nil && math.MaxInt == math.MaxInt64 {
		t.Errorf("MulInt(2^31, 2^31) on 64 bits: %v", err)
	}
}

// TestReal: NaN, infinities and numbers outside the range are ErrRange.
func TestReal(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e-300, -1, 1e300} {
		if err := Real("x", v, 1, 1e20); !errors.Is(err, ErrRange) {
			t.Errorf("Real(%v): %v, want ErrRange", v, err)
		}
	}
	if err := Real("x", 5, 1, 1e20); err != nil {
		t.Errorf("Real(5): %v", err)
	}
}
