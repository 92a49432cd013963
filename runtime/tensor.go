package runtime

import (
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// Tensor is a dense float32 tensor, row-major.
type Tensor struct {
	Shape []int
	Data  []float32
}

// NewTensor returns a zeroed tensor of the given shape; no dimensions make
// a scalar.
func NewTensor(shape ...int) *Tensor {
	return &Tensor{Shape: slices.Clone(shape), Data: make([]float32, numElements(shape))}
}

// numElements is the product of the dimensions: 1 for a scalar. Shapes are
// validated at load, so it cannot overflow here.
func numElements(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// maxTensorElements bounds every tensor the runtime infers or builds:
// larger shapes are load errors rather than allocation failures.
const maxTensorElements = 1 << 34

// checkedElements is numElements for shapes that come from a model file,
// rejecting negative dimensions and element counts past maxTensorElements.
func checkedElements(shape []int) (int, error) {
	return elementsUpTo(shape, maxTensorElements)
}

// elementsUpTo is numElements, refusing negative dimensions and counts
// past limit.
func elementsUpTo(shape []int, limit int) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("shape %s has a negative dimension", formatShape(shape))
		}
		if d != 0 && n > limit/d {
			return 0, fmt.Errorf("shape %s has more than %s elements", formatShape(shape), limitName(limit))
		}
		n *= d
	}
	return n, nil
}

// limitName writes an element bound as a power of two where it is one.
func limitName(limit int) string {
	if limit > 0 && limit&(limit-1) == 0 {
		return fmt.Sprintf("2^%d", bits.TrailingZeros(uint(limit)))
	}
	return fmt.Sprint(limit)
}

// formatShape renders a shape as [1 3 224 224]; a scalar is [].
func formatShape(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.Itoa(d)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// stridesOf returns the row-major element strides of a shape.
func stridesOf(shape []int) []int {
	s := make([]int, len(shape))
	step := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = step
		step *= shape[i]
	}
	return s
}

// normalizeAxis maps a possibly negative axis into [0, rank).
func normalizeAxis(axis int64, rank int) (int, error) {
	a := axis
	if a < 0 {
		a += int64(rank)
	}
	if a < 0 || a >= int64(rank) {
		return 0, fmt.Errorf("axis %d is out of range for rank %d", axis, rank)
	}
	return int(a), nil
}

// joinInts renders integers separated by sep, e.g. "1,1,1,1".
func joinInts[T int | int64](v []T, sep string) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatInt(int64(x), 10)
	}
	return strings.Join(parts, sep)
}
