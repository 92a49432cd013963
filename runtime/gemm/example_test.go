package gemm_test

import (
	"fmt"

	"rulebook/runtime/gemm"
)

// A convolution lowered to im2col: out[M×N] = W[M×K]·col[K×N] with M
// output channels, K = Cin·kh·kw and N = Hout·Wout. The weights are packed
// once; every inference then multiplies without copying them.
func ExampleSgemmPackedA() {
	const m, k, n = 2, 3, 4
	w := []float32{
		1, 0, -1,
		2, 1, 0,
	}
	col := []float32{
		1, 2, 3, 4,
		5, 6, 7, 8,
		9, 10, 11, 12,
	}
	out := make([]float32, m*n)

	pw := gemm.PackA(false, m, k, w, k) // once, at model load
	gemm.SgemmPackedA(2, pw, false, n, 1, col, n, 0, out, n)
	fmt.Println(out[:n])
	fmt.Println(out[n:])
	// Output:
	// [-8 -8 -8 -8]
	// [7 10 13 16]
}

func ExampleSgemm() {
	// C = Aᵀ·B with A stored 2×2 and B 2×1.
	a := []float32{1, 2, 3, 4}
	b := []float32{1, 1}
	c := []float32{100, 100}
	gemm.Sgemm(true, false, 2, 1, 2, 1, a, 2, b, 1, 0.5, c, 1)
	fmt.Println(c)
	// Output: [54 56]
}
