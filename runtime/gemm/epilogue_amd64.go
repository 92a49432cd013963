//go:build !purego

package gemm

// addMax512 is AddMax with AVX-512F: n ≥ 1.
//
//go:noescape
func addMax512(dst, src *float32, n int, b, lo float32)

// max512 and add512 are Max and Add with AVX-512F: n ≥ 1.
//
//go:noescape
func max512(dst, x, y *float32, n int)

//go:noescape
func add512(dst, x, y *float32, n int)

// erf512 is Erf's float64 polynomial on 8 lanes at a time: n is a
// multiple of 8.
//
//go:noescape
func erf512(dst, src *float32, n int, c *erfCoefficients)

// expShift512 is ExpShift on 16 lanes at a time, n ≥ 1.
//
//go:noescape
func expShift512(dst, src *float32, n int, shift float32, c *expConstants) float32

//go:noescape
func mul512(dst, x, y *float32, n int)

// maxStride2512 and addStride2512 are PoolStride2's vector routines: n ≥
// 1 outputs, src readable to 32·⌈n/16⌉ + taps − 1 elements.
//
//go:noescape
func maxStride2512(dst, src *float32, n, taps int, idx *[16]int32)

//go:noescape
func addStride2512(dst, src *float32, n, taps int, idx *[16]int32)

// padRows512 is PadRows with 16-float copies.
//
//go:noescape
func padRows512(dst *float32, dstStride int, src *float32, srcStride int, rows, lo, hi, width int)
