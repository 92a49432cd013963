//go:build !purego

package gemm

// addMax512 is AddMax with AVX-512F: n ≥ 1.
//
//go:noescape
func addMax512(dst, src *float32, n int, b, lo float32)

// max512 is Max with AVX-512F: n ≥ 1.
//
//go:noescape
func max512(dst, x, y *float32, n int)

// arith512 is Add, or Mul when mul, with AVX-512F: n ≥ 1.
//
//go:noescape
func arith512(dst, x, y *float32, n int, mul bool)

// erf512 is Erf's float64 polynomial on 8 lanes at a time: n is a
// multiple of 8.
//
//go:noescape
func erf512(dst, src *float32, n int, c *erfCoefficients)

// expShift512 is ExpShift on 16 lanes at a time, n ≥ 1.
//
//go:noescape
func expShift512(dst, src *float32, n int, shift float32, c *expConstants) float32

// stride2512 is PoolStride2's vector routine: n ≥ 1 outputs, src
// readable to 32·⌈n/16⌉ + taps − 1 elements.
//
//go:noescape
func stride2512(dst, src *float32, n, taps int, idx *[16]int32, isMax bool)

// padRows512 is PadRows with 16-float copies.
//
//go:noescape
func padRows512(dst *float32, dstStride int, src *float32, srcStride int, rows, lo, hi, width int)
