//go:build !purego

package gemm

// addMax512 is AddMax with AVX-512F: n ≥ 1.
//
//go:noescape
func addMax512(dst, src *float32, n int, b, lo float32)
