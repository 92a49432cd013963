package rules

import (
	"slices"
	"testing"
)

// TestDrawCache: a sweep's kept draws are the draws themselves, whatever
// order inputs and shapes come in; the cache stays within its bound, and
// a draw too large to keep is drawn anew each time.
func TestDrawCache(t *testing.T) {
	drawn := 0
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
	small, other := NewShape(4, 4), NewShape(2, 8)
	split := small
	split.Degrees[0] = 2
	huge := NewShape(1024, 1024)
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
		{"other extents", -1, 0, other, 3},
		{"other layout", -1, 0, split, 4},
		{"float stream 0", 0, 0, small, 5},
		{"float stream 1", 1, 0, small, 6},
		{"float again", 0, 0, small, 6},
		{"exact again", -1, 1, small, 6},
		{"too large", -1, 0, huge, 7},
		{"too large again", -1, 0, huge, 8},
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
		if c.elements > drawCacheElements {
			t.Errorf("%s: %d elements kept, over the bound of %d", tc.name, c.elements, drawCacheElements)
		}
	}
	for i := range 2 * drawCacheElements / (256 * 256) {
		c.int(ints, i, NewShape(256, 256))
		if c.elements > drawCacheElements {
			t.Fatalf("%d elements kept, over the bound of %d", c.elements, drawCacheElements)
		}
	}
}
