//go:build ignore

// gen_kernels writes kernels_amd64.s and kernels_amd64.go: the AVX-512
// microkernels and the 16×16 transposing packer. Run it with
// `go generate ./runtime/gemm` after changing it; the generated files are
// committed so that building needs no generator.
//
// The kernels are generated rather than written by hand because the driver
// needs one per tile height (1…14 rows) and operand layout: a tile whose
// height is exact costs no wasted work in the broadcast (row) direction,
// so only the vector (column) direction ever pads.
package main

import (
	"bytes"
	"fmt"
	"go/format"
	"log"
	"os"
	"strings"
)

const (
	maxMR = 14 // rows of the tallest tile: 14×2 accumulators + 2 B + 2 broadcast = 32 zmm
	// maxMRAVX2 is the same for the AVX2 kernels: 6×2 + 2 + 2 = 16 ymm.
	maxMRAVX2 = 6
	unroll    = 4 // k steps per loop iteration
	// prefetchRows is how many k steps ahead the copying kernels prefetch
	// B: 16 steps of 14 cycles cover an L3 hit and most of a DRAM miss.
	prefetchRows = 16
)

type gen struct{ b bytes.Buffer }

func (g *gen) p(format string, args ...any) {
	fmt.Fprintf(&g.b, format, args...)
	g.b.WriteByte('\n')
}

// Argument frame shared by all kernels (ABI0, offsets in bytes):
//
//	k+0 a+8 as+16 b+24 bs+32 c+40 ldc+48 alpha+56 beta+60 mask+64 bp+72
const kernArgs = "$0-80"

// arAddr is the address of A(row i, k step u) in the row-major layout: rows
// 0…6 hang off SI and rows 7…13 off DI = SI+7·s, through the index
// registers R8 = s, R9 = 3s, R10 = 5s (s = row stride in bytes), so that
// one add per base register advances all 14 rows.
func arAddr(i, u int) string {
	base, j := "SI", i
	if i >= 7 {
		base, j = "DI", i-7
	}
	idx := [...]string{"", "(R8*1)", "(R8*2)", "(R9*1)", "(R8*4)", "(R10*1)", "(R9*2)"}[j]
	return fmt.Sprintf("%d(%s)%s", 4*u, base, idx)
}

// kernel emits one microkernel: mr rows, nv vectors of 16 columns, A in
// row-major ("ar") or k-major ("ak") layout. B rows are loaded under the
// column mask (zeroing, faults suppressed), so an edge panel read straight
// from the caller's B never touches memory past its last column; measured
// on Zen 5, masked loads cost the same as plain ones.
func (g *gen) kernel(mode string, mr, nv int) string {
	name := fmt.Sprintf("k%s%dx%d", mode, mr, nv)
	g.p("// func %s(k int, a *float32, as int, b *float32, bs int, c *float32, ldc int, alpha, beta float32, mask uint64, bp *float32)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, %s", name, kernArgs)
	g.p("\tMOVQ k+0(FP), CX")
	g.p("\tMOVQ a+8(FP), SI")
	g.p("\tMOVQ as+16(FP), R8")
	g.p("\tSHLQ $2, R8")
	if mode == "ar" {
		g.p("\tLEAQ (R8)(R8*2), R9")
		g.p("\tLEAQ (R8)(R8*4), R10")
		g.p("\tLEAQ (SI)(R9*2), DI")
		g.p("\tADDQ R8, DI")
	}
	g.p("\tMOVQ b+24(FP), BX")
	g.p("\tMOVQ bs+32(FP), R11")
	g.p("\tSHLQ $2, R11")
	g.p("\tMOVQ mask+64(FP), AX")
	g.p("\tKMOVW AX, K1")
	if nv == 2 {
		g.p("\tSHRQ $16, AX")
		g.p("\tKMOVW AX, K2")
	}
	// Touch the C tile early so its lines arrive while the k loop runs.
	g.p("\tMOVQ c+40(FP), DX")
	g.p("\tMOVQ ldc+48(FP), R12")
	g.p("\tSHLQ $2, R12")
	g.p("\tMOVQ DX, R13")
	for i := 0; i < mr; i++ {
		g.p("\tPREFETCHT0 (R13)")
		if nv == 2 {
			g.p("\tPREFETCHT0 64(R13)")
		}
		if i < mr-1 {
			g.p("\tADDQ R12, R13")
		}
	}
	for i := 0; i < mr*nv; i++ {
		g.p("\tVPXORD Z%d, Z%d, Z%d", i, i, i)
	}
	acc := func(i, v int) int { return i*nv + v }
	// step emits one k step; with copyB it also stores the B row just
	// loaded into the packed panel at R13 (fused packing).
	step := func(u int, copyB bool) {
		for v := 0; v < nv; v++ {
			g.p("\tVMOVUPS.Z %d(BX), K%d, Z%d", 64*v, v+1, 28+v)
		}
		g.p("\tADDQ R11, BX")
		if copyB {
			for v := 0; v < nv; v++ {
				g.p("\tVMOVUPS Z%d, %d(R13)", 28+v, 64*v)
				g.p("\tPREFETCHT0 %d(DX)", 64*v)
			}
			g.p("\tADDQ $128, R13")
			g.p("\tADDQ R11, DX")
		}
		for i := 0; i < mr; i++ {
			bc := 30 + i%2
			if mode == "ar" {
				g.p("\tVBROADCASTSS %s, Z%d", arAddr(i, u), bc)
			} else {
				g.p("\tVBROADCASTSS %d(SI), Z%d", 4*i, bc)
			}
			for v := 0; v < nv; v++ {
				g.p("\tVFMADD231PS Z%d, Z%d, Z%d", 28+v, bc, acc(i, v))
			}
		}
		if mode == "ak" {
			g.p("\tADDQ R8, SI")
		}
	}
	loops := func(l string, copyB bool) {
		g.p("\tMOVQ CX, AX")
		g.p("\tSHRQ $%d, CX", log2(unroll))
		g.p("\tANDQ $%d, AX", unroll-1)
		g.p("\tTESTQ CX, CX")
		g.p("\tJZ %s_tail%s", name, l)
		g.p("%s_loop%s:", name, l)
		for u := 0; u < unroll; u++ {
			step(u, copyB)
		}
		if mode == "ar" {
			g.p("\tADDQ $%d, SI", 4*unroll)
			if mr > 7 {
				g.p("\tADDQ $%d, DI", 4*unroll)
			}
		}
		g.p("\tDECQ CX")
		g.p("\tJNZ %s_loop%s", name, l)
		g.p("%s_tail%s:", name, l)
		g.p("\tTESTQ AX, AX")
		g.p("\tJZ %s_store", name)
		g.p("%s_tailloop%s:", name, l)
		step(0, copyB)
		if mode == "ar" {
			g.p("\tADDQ $4, SI")
			if mr > 7 {
				g.p("\tADDQ $4, DI")
			}
		}
		g.p("\tDECQ AX")
		g.p("\tJNZ %s_tailloop%s", name, l)
		g.p("\tJMP %s_store", name)
	}
	g.p("\tMOVQ bp+72(FP), R13")
	g.p("\tTESTQ R13, R13")
	g.p("\tJNZ %s_copy", name)
	loops("", false)
	// The copying loop reads B in place, rows far apart: prefetch the row
	// prefetchRows ahead (DX, free until the store, walks with BX).
	g.p("%s_copy:", name)
	g.p("\tMOVQ R11, DX")
	g.p("\tIMULQ $%d, DX", prefetchRows)
	g.p("\tADDQ BX, DX")
	loops("c", true)

	// C = alpha·acc + beta·C, or alpha·acc when beta is ±0 (C not read).
	g.p("%s_store:", name)
	g.p("\tMOVQ c+40(FP), DX")
	g.p("\tVBROADCASTSS alpha+56(FP), Z30")
	g.p("\tVBROADCASTSS beta+60(FP), Z31")
	g.p("\tMOVL beta+60(FP), AX")
	g.p("\tTESTL $0x7fffffff, AX")
	g.p("\tJZ %s_beta0", name)
	for i := 0; i < mr; i++ {
		for v := 0; v < nv; v++ {
			g.p("\tVMULPS Z30, Z%d, Z%d", acc(i, v), acc(i, v))
			g.p("\tVFMADD231PS %d(DX), Z31, K%d, Z%d", 64*v, v+1, acc(i, v))
			g.p("\tVMOVUPS Z%d, K%d, %d(DX)", acc(i, v), v+1, 64*v)
		}
		if i < mr-1 {
			g.p("\tADDQ R12, DX")
		}
	}
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("%s_beta0:", name)
	for i := 0; i < mr; i++ {
		for v := 0; v < nv; v++ {
			g.p("\tVMULPS Z30, Z%d, Z%d", acc(i, v), acc(i, v))
			g.p("\tVMOVUPS Z%d, K%d, %d(DX)", acc(i, v), v+1, 64*v)
		}
		if i < mr-1 {
			g.p("\tADDQ R12, DX")
		}
	}
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
	return name
}

func log2(x int) int {
	n := 0
	for x > 1 {
		x >>= 1
		n++
	}
	return n
}

// transpose emits transpose16: nb blocks of 16 rows × 16 columns of src
// (row stride ss elements, blocks side by side) become nb blocks of 16
// columns × 16 rows of dst (row stride ds elements, blocks one under the
// other). Only the columns of src under mask are read (the others are
// taken as zero), so a last, narrower block can be transposed without
// reading past the matrix. Register plan: Z0–Z15 rows in, Z16–Z31 temporaries, Z0–Z15
// columns out.
//
//  1. VUNPCK[LH]PS pairs rows 2p,2p+1: per 128-bit lane the 64-bit
//     halves now hold (row 2p, row 2p+1) at columns 0,1 (low) or 2,3 (high).
//  2. VUNPCK[LH]PD pairs those: per lane, one register v(g,c) holds
//     rows 4g…4g+3 at column 4·lane+c.
//  3. Two rounds of VSHUFF32X4 transpose the 4×4 grid of 128-bit lanes of
//     v(0…3,c), giving whole columns c, 4+c, 8+c, 12+c.
func (g *gen) transpose() {
	g.p("// transpose16: nb 16×16 blocks, side by side in src, stacked in dst.")
	g.p("// Z0–Z15 rows in (columns under K1), Z16–Z31 temporaries, Z0–Z15")
	g.p("// columns out: VUNPCK[LH]PS pairs rows, VUNPCK[LH]PD makes per-lane")
	g.p("// 4×4 transposes, two rounds of VSHUFF32X4 transpose the 4×4 grid of")
	g.p("// 128-bit lanes.")
	g.p("// func transpose16(dst *float32, ds int, src *float32, ss int, nb int, mask uint64)")
	g.p("TEXT ·transpose16(SB), NOSPLIT, $0-48")
	g.p("\tMOVQ mask+40(FP), AX")
	g.p("\tKMOVW AX, K1")
	g.p("\tMOVQ dst+0(FP), DI")
	g.p("\tMOVQ ds+8(FP), R9")
	g.p("\tSHLQ $2, R9")
	g.p("\tMOVQ src+16(FP), SI")
	g.p("\tMOVQ ss+24(FP), R8")
	g.p("\tSHLQ $2, R8")
	g.p("\tMOVQ nb+32(FP), CX")
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ tr_done")
	g.p("tr_loop:")
	g.p("\tMOVQ SI, AX")
	for r := 0; r < 16; r++ {
		g.p("\tVMOVUPS.Z (AX), K1, Z%d", r)
		if r < 15 {
			g.p("\tADDQ R8, AX")
		}
	}
	for p := 0; p < 8; p++ {
		g.p("\tVUNPCKLPS Z%d, Z%d, Z%d", 2*p+1, 2*p, 16+2*p)
		g.p("\tVUNPCKHPS Z%d, Z%d, Z%d", 2*p+1, 2*p, 17+2*p)
	}
	for gr := 0; gr < 4; gr++ {
		t := 16 + 4*gr
		g.p("\tVUNPCKLPD Z%d, Z%d, Z%d", t+2, t, 4*gr+0)
		g.p("\tVUNPCKHPD Z%d, Z%d, Z%d", t+2, t, 4*gr+1)
		g.p("\tVUNPCKLPD Z%d, Z%d, Z%d", t+3, t+1, 4*gr+2)
		g.p("\tVUNPCKHPD Z%d, Z%d, Z%d", t+3, t+1, 4*gr+3)
	}
	v := func(gr, c int) int { return 4*gr + c }
	for c := 0; c < 4; c++ {
		w := 16 + 4*c
		g.p("\tVSHUFF32X4 $0x44, Z%d, Z%d, Z%d", v(1, c), v(0, c), w+0)
		g.p("\tVSHUFF32X4 $0xEE, Z%d, Z%d, Z%d", v(1, c), v(0, c), w+1)
		g.p("\tVSHUFF32X4 $0x44, Z%d, Z%d, Z%d", v(3, c), v(2, c), w+2)
		g.p("\tVSHUFF32X4 $0xEE, Z%d, Z%d, Z%d", v(3, c), v(2, c), w+3)
	}
	for c := 0; c < 4; c++ {
		w := 16 + 4*c
		g.p("\tVSHUFF32X4 $0x88, Z%d, Z%d, Z%d", w+2, w+0, c)
		g.p("\tVSHUFF32X4 $0xDD, Z%d, Z%d, Z%d", w+2, w+0, 4+c)
		g.p("\tVSHUFF32X4 $0x88, Z%d, Z%d, Z%d", w+3, w+1, 8+c)
		g.p("\tVSHUFF32X4 $0xDD, Z%d, Z%d, Z%d", w+3, w+1, 12+c)
	}
	g.p("\tMOVQ DI, AX")
	for r := 0; r < 16; r++ {
		g.p("\tVMOVUPS Z%d, (AX)", r)
		if r < 15 {
			g.p("\tADDQ R9, AX")
		}
	}
	g.p("\tADDQ $64, SI")
	g.p("\tLEAQ (AX)(R9*1), DI")
	g.p("\tDECQ CX")
	g.p("\tJNZ tr_loop")
	g.p("tr_done:")
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// kernelAVX2 emits one AVX2+FMA microkernel with the same arguments and
// semantics as the AVX-512 ones, for CPUs without AVX-512: mr ≤ 6 rows ×
// nv ≤ 2 vectors of 8 columns. Register plan: Y0…Y11 accumulators (row i,
// vector v in Y(i·nv+v)), Y12/Y13 the B row, Y14/Y15 broadcasts of A.
// AVX2 has no opmask registers, so B rows are loaded whole (the driver
// pads partial panels: kernelSet.maskedB is false) and C is read and
// written under VMASKMOVPS lane masks only when the tile is narrower than
// nv·8 columns (masked stores are slow on some AMD cores).
func (g *gen) kernelAVX2(mode string, mr, nv int) string {
	name := fmt.Sprintf("y%s%dx%d", mode, mr, nv)
	acc := func(i, v int) int { return i*nv + v }
	g.p("// func %s(k int, a *float32, as int, b *float32, bs int, c *float32, ldc int, alpha, beta float32, mask uint64, bp *float32)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, %s", name, kernArgs)
	g.p("\tMOVQ k+0(FP), CX")
	g.p("\tMOVQ a+8(FP), SI")
	g.p("\tMOVQ as+16(FP), R8")
	g.p("\tSHLQ $2, R8")
	if mode == "ar" {
		g.p("\tLEAQ (R8)(R8*2), R9")
		g.p("\tLEAQ (R8)(R8*4), R10")
	}
	g.p("\tMOVQ b+24(FP), BX")
	g.p("\tMOVQ bs+32(FP), R11")
	g.p("\tSHLQ $2, R11")
	g.p("\tMOVQ c+40(FP), DX")
	g.p("\tMOVQ ldc+48(FP), R12")
	g.p("\tSHLQ $2, R12")
	g.p("\tMOVQ DX, R13")
	for i := 0; i < mr; i++ {
		g.p("\tPREFETCHT0 (R13)")
		if i < mr-1 {
			g.p("\tADDQ R12, R13")
		}
	}
	for i := 0; i < mr*nv; i++ {
		g.p("\tVXORPS Y%d, Y%d, Y%d", i, i, i)
	}
	step := func(u int, copyB bool) {
		for v := 0; v < nv; v++ {
			g.p("\tVMOVUPS %d(BX), Y%d", 32*v, 12+v)
		}
		g.p("\tADDQ R11, BX")
		if copyB {
			for v := 0; v < nv; v++ {
				g.p("\tVMOVUPS Y%d, %d(R13)", 12+v, 32*v)
			}
			g.p("\tPREFETCHT0 (DX)")
			g.p("\tADDQ $128, R13")
			g.p("\tADDQ R11, DX")
		}
		for i := 0; i < mr; i++ {
			bc := 14 + i%2
			if mode == "ar" {
				g.p("\tVBROADCASTSS %s, Y%d", arAddr(i, u), bc)
			} else {
				g.p("\tVBROADCASTSS %d(SI), Y%d", 4*i, bc)
			}
			for v := 0; v < nv; v++ {
				g.p("\tVFMADD231PS Y%d, Y%d, Y%d", 12+v, bc, acc(i, v))
			}
		}
		if mode == "ak" {
			g.p("\tADDQ R8, SI")
		}
	}
	loops := func(l string, copyB bool) {
		g.p("\tMOVQ CX, AX")
		g.p("\tSHRQ $%d, CX", log2(unroll))
		g.p("\tANDQ $%d, AX", unroll-1)
		g.p("\tTESTQ CX, CX")
		g.p("\tJZ %s_tail%s", name, l)
		g.p("%s_loop%s:", name, l)
		for u := 0; u < unroll; u++ {
			step(u, copyB)
		}
		if mode == "ar" {
			g.p("\tADDQ $%d, SI", 4*unroll)
		}
		g.p("\tDECQ CX")
		g.p("\tJNZ %s_loop%s", name, l)
		g.p("%s_tail%s:", name, l)
		g.p("\tTESTQ AX, AX")
		g.p("\tJZ %s_store", name)
		g.p("%s_tailloop%s:", name, l)
		step(0, copyB)
		if mode == "ar" {
			g.p("\tADDQ $4, SI")
		}
		g.p("\tDECQ AX")
		g.p("\tJNZ %s_tailloop%s", name, l)
		g.p("\tJMP %s_store", name)
	}
	g.p("\tMOVQ bp+72(FP), R13")
	g.p("\tTESTQ R13, R13")
	g.p("\tJNZ %s_copy", name)
	loops("", false)
	g.p("%s_copy:", name)
	g.p("\tMOVQ R11, DX")
	g.p("\tIMULQ $%d, DX", prefetchRows)
	g.p("\tADDQ BX, DX")
	loops("c", true)

	g.p("%s_store:", name)
	g.p("\tMOVQ c+40(FP), DX")
	g.p("\tVBROADCASTSS alpha+56(FP), Y14")
	g.p("\tVBROADCASTSS beta+60(FP), Y15")
	for i := 0; i < mr*nv; i++ {
		g.p("\tVMULPS Y14, Y%d, Y%d", i, i)
	}
	g.p("\tMOVL beta+60(FP), BX")
	g.p("\tMOVQ mask+64(FP), AX")
	g.p("\tPOPCNTQ AX, AX")
	g.p("\tCMPQ AX, $%d", 8*nv)
	g.p("\tJNE %s_masked", name)
	// Whole vectors.
	g.p("\tTESTL $0x7fffffff, BX")
	g.p("\tJZ %s_full0", name)
	for i := 0; i < mr; i++ {
		for v := 0; v < nv; v++ {
			g.p("\tVFMADD231PS %d(DX), Y15, Y%d", 32*v, acc(i, v))
		}
		for v := 0; v < nv; v++ {
			g.p("\tVMOVUPS Y%d, %d(DX)", acc(i, v), 32*v)
		}
		if i < mr-1 {
			g.p("\tADDQ R12, DX")
		}
	}
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("%s_full0:", name)
	for i := 0; i < mr; i++ {
		for v := 0; v < nv; v++ {
			g.p("\tVMOVUPS Y%d, %d(DX)", acc(i, v), 32*v)
		}
		if i < mr-1 {
			g.p("\tADDQ R12, DX")
		}
	}
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	// Lane masks: lane l of vector v is on iff 8v+l < popcount(mask).
	g.p("%s_masked:", name)
	g.p("\tMOVQ AX, X14")
	g.p("\tVPBROADCASTD X14, Y14")
	for v := 0; v < nv; v++ {
		g.p("\tVMOVDQU gemmIota<>+%d(SB), Y%d", 32*v, 12+v)
		g.p("\tVPCMPGTD Y%d, Y14, Y%d", 12+v, 12+v)
	}
	g.p("\tTESTL $0x7fffffff, BX")
	g.p("\tJZ %s_masked0", name)
	for i := 0; i < mr; i++ {
		for v := 0; v < nv; v++ {
			g.p("\tVMASKMOVPS %d(DX), Y%d, Y14", 32*v, 12+v)
			g.p("\tVFMADD231PS Y15, Y14, Y%d", acc(i, v))
			g.p("\tVMASKMOVPS Y%d, Y%d, %d(DX)", acc(i, v), 12+v, 32*v)
		}
		if i < mr-1 {
			g.p("\tADDQ R12, DX")
		}
	}
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("%s_masked0:", name)
	for i := 0; i < mr; i++ {
		for v := 0; v < nv; v++ {
			g.p("\tVMASKMOVPS Y%d, Y%d, %d(DX)", acc(i, v), 12+v, 32*v)
		}
		if i < mr-1 {
			g.p("\tADDQ R12, DX")
		}
	}
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
	return name
}

// asmHeader documents the generated file.
const asmHeader = `
// Microkernels: C[mr×n] = alpha·A[mr×k]·B[k×n] + beta·C, n ≤ 16·nv under
// a column mask; one TEXT per tile height mr, vector count nv and layout
// of A (kar*: row-major, A(i,p) at a + i·as + p; kak*: k-major, at
// a + p·as + i). All take (k, a, as, b, bs, c, ldc, alpha, beta, mask, bp)
// on the stack (ABI0); strides are in elements.
//
// AVX-512 register allocation (k*14x2, the full tile; smaller tiles use a
// prefix of the accumulators):
//
//	Z0…Z27   accumulators: row i, columns 16v…16v+15 in Z(i·nv+v)
//	Z28,Z29  the current row of B (two 16-float loads, zeroing mask K1/K2)
//	Z30,Z31  broadcasts of A(i,p), alternating so that consecutive rows'
//	         broadcasts do not wait on each other; after the loop, alpha
//	         and beta
//	K1,K2    column masks (low/high 16 columns of the tile)
//	CX, AX   k/4 and k%4 counters (the loop is unrolled 4 times)
//	SI, DI   A: row 0, and row 7 (row-major); R8 = as·4, R9 = 3·R8,
//	         R10 = 5·R8 reach rows 0…6 from SI and 7…13 from DI, e.g.
//	         row 5 = (SI)(R10*1), row 13 = (DI)(R9*2)
//	BX, R11  B row pointer and stride in bytes
//	DX, R12  C row pointer and ldc in bytes (DX prefetches B while the
//	         fused-packing loop runs)
//	R13      packed-panel destination (fused packing), else 0
//
// Per k step the full tile issues 2 loads of B, 14 broadcasts and 28 FMAs:
// on Zen 5 (two 512-bit FMA pipes, 4-cycle latency) 14 cycles, with 28
// independent accumulator chains hiding the latency 3.5 times over.
//
// The AVX2 kernels (y*) follow the same plan on ymm: Y0…Y11 accumulate a
// 6×16 tile, Y12/Y13 hold the B row, Y14/Y15 the broadcasts.
`

func main() {
	var s gen
	s.p("// Code generated by gen_kernels.go; DO NOT EDIT.")
	s.p("")
	s.p("//go:build !purego")
	s.p("")
	s.p(`#include "textflag.h"`)
	s.p("")
	s.p("%s", strings.TrimSpace(asmHeader))
	s.p("")
	var decl strings.Builder
	decl.WriteString("// Code generated by gen_kernels.go; DO NOT EDIT.\n\n//go:build !purego\n\npackage gemm\n\n")
	tables := map[string][]string{}
	for _, mode := range []string{"ar", "ak"} {
		for _, nv := range []int{2, 1} {
			key := fmt.Sprint(mode, nv)
			tables[key] = append(tables[key], "nil")
			for mr := 1; mr <= maxMR; mr++ {
				name := s.kernel(mode, mr, nv)
				fmt.Fprintf(&decl, "//go:noescape\nfunc %s(k int, a *float32, as int, b *float32, bs int, c *float32, ldc int, alpha, beta float32, mask uint64, bp *float32)\n\n", name)
				tables[key] = append(tables[key], name)
			}
		}
	}
	s.transpose()
	decl.WriteString("//go:noescape\nfunc transpose16(dst *float32, ds int, src *float32, ss int, nb int, mask uint64)\n\n")
	s.p("// gemmIota is 0, 1, …, 15: the AVX2 kernels compare it with a column")
	s.p("// count to make lane masks.")
	for i := 0; i < 16; i++ {
		s.p("DATA gemmIota<>+%d(SB)/4, $%d", 4*i, i)
	}
	s.p("GLOBL gemmIota<>(SB), RODATA|NOPTR, $64")
	s.p("")
	for _, mode := range []string{"ar", "ak"} {
		for _, nv := range []int{2, 1} {
			key := fmt.Sprint("y", mode, nv)
			tables[key] = append(tables[key], "nil")
			for mr := 1; mr <= maxMRAVX2; mr++ {
				name := s.kernelAVX2(mode, mr, nv)
				fmt.Fprintf(&decl, "//go:noescape\nfunc %s(k int, a *float32, as int, b *float32, bs int, c *float32, ldc int, alpha, beta float32, mask uint64, bp *float32)\n\n", name)
				tables[key] = append(tables[key], name)
			}
			for mr := maxMRAVX2 + 1; mr <= maxMR; mr++ {
				tables[key] = append(tables[key], "nil")
			}
			fmt.Fprintf(&decl, "var avx2%s%d = [...]kernelFunc{%s}\n\n", strings.ToUpper(mode), nv, strings.Join(tables[key], ", "))
		}
	}
	for _, mode := range []string{"ar", "ak"} {
		for _, nv := range []int{2, 1} {
			key := fmt.Sprint(mode, nv)
			fmt.Fprintf(&decl, "var avx512%s%d = [...]kernelFunc{%s}\n\n", strings.ToUpper(mode), nv, strings.Join(tables[key], ", "))
		}
	}
	if err := os.WriteFile("kernels_amd64.s", s.b.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	src, err := format.Source([]byte(decl.String()))
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("kernels_amd64.go", src, 0o644); err != nil {
		log.Fatal(err)
	}
}
