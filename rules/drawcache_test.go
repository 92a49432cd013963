package rules

import (
	"slices"
	"testing"
)

// TestDrawCache: what a sweep's draw cache hands out equals a fresh draw,
// whatever order inputs and shapes come in; an input is drawn again only
// when a shape needs more elements than its longest draw holds, and a
// draw too large to keep is drawn anew each time.
func TestDrawCache(t *testing.T) {
	drawn := 0
	// Both draw one stream per input: the value at position k depends on
	// the input (and float stream) and k only, as SweepConfig asks.
	ints := func(i int, s Shape) *IntTensor {
		drawn++
		x := NewTensor[uint32](s)
		for k := range x.Data {
			x.Data[k] = uint32(1000*i + k)
		}
		return x
	}
	floats := func(stream uint64, i int, s Shape) *FloatTensor {
		drawn++
		x := NewTensor[float64](s)
		for k := range x.Data {
			x.Data[k] = float64(stream) + float64(i)/10 + float64(k)/1000
		}
		return x
	}
	small, other, larger := NewShape(4, 4), NewShape(2, 8), NewShape(4, 6)
	split := small
	split.Degrees[0] = 2
	sums := small
	sums.Sum = 2
	huge := NewShape(2048, 2048)
	cases := []struct {
		name   string
		stream int64 // -1 draws exact values
		input  int
		shape  Shape
		draws  int // fresh draws so far
	}{
		{"first", -1, 0, small, 1},
		{"again", -1, 0, small, 1},
		{"other input", -1, 1, small, 2},
		{"other extents, as many elements", -1, 0, other, 2},
		{"other layout", -1, 0, split, 2},
		{"more elements", -1, 0, larger, 3}, // draws 2×16
		{"partial sums, twice the elements", -1, 0, sums, 3},
		{"float stream 0", 0, 0, small, 4},
		{"float stream 1", 1, 0, small, 5},
		{"float again, more elements", 0, 0, larger, 6},
		{"exact again", -1, 1, small, 6},
		{"too large", -1, 0, huge, 7},
		{"too large again", -1, 0, huge, 8},
		{"kept draw survives", -1, 0, sums, 8},
	}
	var c drawCache
	for _, tc := range cases {
		if tc.stream < 0 {
			got, want := c.int(ints, tc.input, tc.shape), ints(tc.input, tc.shape)
			drawn--
			if got.Shape != want.Shape || !slices.Equal(got.Data, want.Data) {
				t.Errorf("%s: the kept draw differs from a fresh one", tc.name)
			}
		} else {
			got, want := c.float(floats, uint64(tc.stream), tc.input, tc.shape), floats(uint64(tc.stream), tc.input, tc.shape)
			drawn--
			if got.Shape != want.Shape || !slices.Equal(got.Data, want.Data) {
				t.Errorf("%s: the kept draw differs from a fresh one", tc.name)
			}
		}
		if drawn != tc.draws {
			t.Errorf("%s: %d fresh draws, want %d", tc.name, drawn, tc.draws)
		}
	}
	for i, buf := range c.ints {
		if len(buf) > drawCacheElements {
			t.Errorf("input %d: %d elements kept, over the bound of %d", i, len(buf), drawCacheElements)
		}
	}
}
