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
