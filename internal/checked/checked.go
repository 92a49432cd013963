// Package checked is the arithmetic of counts, sizes and rates that come
// from files and flags. A product that does not fit, or a number that is not
// finite or not in its range, is an error. It never becomes a wrapped or
// infinite value that a later step divides by or indexes with.
// docs/design.md's package map lists it.
package checked

import (
	"errors"
	"fmt"
	"math"
)

// ErrOverflow marks a product or sum that does not fit in 64 bits.
var ErrOverflow = errors.New("overflows a 64-bit integer")

// ErrRange marks a number that is not finite or outside its range.
var ErrRange = errors.New("out of range")

// Mul is a·b, or ErrOverflow.
func Mul(a, b int64) (int64, error) {
	if a == 0 || b == 0 {
		return 0, nil
	}
	c := a * b
	if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, fmt.Errorf("%d × %d %w", a, b, ErrOverflow)
	}
	return c, nil
}

// Add is a+b, or ErrOverflow.
func Add(a, b int64) (int64, error) {
	c := a + b
	if (b > 0 && c < a) || (b < 0 && c > a) {
		return 0, fmt.Errorf("%d + %d %w", a, b, ErrOverflow)
	}
	return c, nil
}

// Product multiplies xs, or fails with ErrOverflow.
func Product(xs ...int64) (int64, error) {
	p := int64(1)
	for _, x := range xs {
		var err error
		if p, err = Mul(p, x); err != nil {
			return 0, err
		}
	}
	return p, nil
}

// MulInt is a·b for ints, or ErrOverflow (int may be 32 bits).
func MulInt(a, b int) (int, error) {
	c, err := Mul(int64(a), int64(b))
	if err != nil || int64(int(c)) != c {
		return 0, fmt.Errorf("%d × %d %w", a, b, ErrOverflow)
	}
	return int(c), nil
}

// Count checks that an integer count lies in [lo, hi]; field names it.
func Count(field string, v, lo, hi int64) error {
	if v < lo || v > hi {
		return fmt.Errorf("%s is %d; want %d to %d: %w", field, v, lo, hi, ErrRange)
	}
	return nil
}

// Real checks that v is finite and lies in [lo, hi]; field names it. NaN
// and ±Inf always fail.
func Real(field string, v, lo, hi float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < lo || v > hi {
		return fmt.Errorf("%s is %v; want a number from %g to %g: %w", field, v, lo, hi, ErrRange)
	}
	return nil
}
