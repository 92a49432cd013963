package runtime

import (
	"fmt"
	"math"
	"testing"
)

// naivePool2D pools x (N×C×H×W) window by window: the maximum, or the mean
// over the taps inside the input (includePad false) or inside input and
// padding.
func naivePool2D(x *Tensor, isMax, includePad bool, kernel, strides, pads, out []int) []float32 {
	n, c, h, w := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	y := make([]float32, n*c*out[0]*out[1])
	i := 0
	for p := range n * c {
		plane := x.Data[p*h*w : (p+1)*h*w]
		for oh := range out[0] {
			for ow := range out[1] {
				acc, inside, padded := float32(math.Inf(-1)), 0, 0
				if !isMax {
					acc = 0
				}
				for a := range kernel[0] {
					for b := range kernel[1] {
						iy, ix := oh*strides[0]-pads[0]+a, ow*strides[1]-pads[1]+b
						if iy < h+pads[2] && ix < w+pads[3] {
							padded++
						}
						if iy < 0 || iy >= h || ix < 0 || ix >= w {
							continue
						}
						inside++
						if isMax {
							acc = max(acc, plane[iy*w+ix])
						} else {
							acc += plane[iy*w+ix]
						}
					}
				}
				if !isMax {
					if includePad {
						acc /= float32(padded)
					} else {
						acc /= float32(inside)
					}
				}
				y[i] = acc
				i++
			}
		}
	}
	return y
}

// TestPoolAgainstNaive covers the fast path's cases (pool2d.go): strides 1
// and 2 by row and column, padding, ceil_mode overhang, counts with and
// without padding, planes larger than one block, and more planes than
// slots.
func TestPoolAgainstNaive(t *testing.T) {
	tests := []struct {
		x                     []int
		kernel, strides, pads []int
		ceil, includePad      bool
		out                   []int
	}{
		{[]int{1, 3, 9, 9}, []int{3, 3}, []int{1, 1}, []int{0, 0, 0, 0}, false, false, []int{7, 7}},
		{[]int{1, 40, 37, 37}, []int{3, 3}, []int{1, 1}, []int{1, 1, 1, 1}, false, false, []int{37, 37}},
		{[]int{1, 40, 37, 37}, []int{3, 3}, []int{1, 1}, []int{1, 1, 1, 1}, false, true, []int{37, 37}},
		{[]int{2, 5, 147, 147}, []int{3, 3}, []int{2, 2}, []int{0, 0, 0, 0}, false, false, []int{73, 73}},
		{[]int{1, 4, 112, 112}, []int{3, 3}, []int{2, 2}, []int{1, 1, 1, 1}, false, false, []int{56, 56}},
		{[]int{1, 6, 55, 55}, []int{3, 3}, []int{2, 2}, []int{0, 0, 0, 0}, true, false, []int{27, 27}},
		{[]int{1, 6, 56, 56}, []int{3, 3}, []int{2, 2}, []int{0, 0, 0, 0}, true, false, []int{28, 28}},
		{[]int{1, 3, 8, 9}, []int{2, 2}, []int{2, 2}, []int{0, 0, 0, 0}, false, false, []int{4, 4}},
		{[]int{1, 3, 10, 11}, []int{2, 3}, []int{3, 1}, []int{0, 1, 1, 1}, false, false, []int{4, 11}},
		{[]int{1, 2, 9, 20}, []int{5, 4}, []int{1, 2}, []int{2, 1, 2, 1}, false, true, []int{9, 10}},
	}
	for i, tc := range tests {
		for _, op := range []string{"MaxPool", "AveragePool"} {
			if tc.ceil && op == "AveragePool" && tc.includePad {
				continue
			}
			t.Run(fmt.Sprintf("%d/%s", i, op), func(t *testing.T) {
				x := randomTensor(uint64(i+1), tc.x...)
				attrs := [][]byte{pbAttrInts("kernel_shape", toInt64s(tc.kernel)...), pbAttrInts("strides", toInt64s(tc.strides)...),
					pbAttrInts("pads", toInt64s(tc.pads)...), pbAttrInt("ceil_mode", int64(boolInt(tc.ceil)))}
				if op == "AveragePool" {
					attrs = append(attrs, pbAttrInt("count_include_pad", int64(boolInt(tc.includePad))))
				}
				got := runNode(t, 19, pbNode(op, []string{"x"}, []string{"y"}, attrs...), nil, []namedTensor{{"x", x}}, "y")[0]
				want := naivePool2D(x, op == "MaxPool", tc.includePad, tc.kernel, tc.strides, tc.pads, tc.out)
				assertClose(t, got, append(tc.x[:2:2], tc.out...), want)
			})
		}
	}
}
