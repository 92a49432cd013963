//go:build !purego

#include "textflag.h"

// ERF8 evaluates Erf's polynomial on the 8 floats at off(SI) in float64,
// as erfScalar does, and stores them at off(DI). v, u, u2, e and o are
// work registers (oy is o's lower half); coefficients and constants are in Z10–Z31 (erf512).
#define ERF8(off, v, u, u2, e, o, oy) \
	VCVTPS2PD   off(SI), v        \
	VPANDQ      Z13, v, u         \
	VCMPPD      $0x1D, Z12, u, K2 \ // |v| ≥ limit
	VMULPD      v, v, u           \
	VFMSUB213PD Z11, Z10, u       \ // u = v²·(2/16) − 1
	VMULPD      u, u, u2          \
	VMOVAPD     Z15, e            \
	VMOVAPD     Z16, o            \
	VFMADD213PD Z17, u2, e        \
	VFMADD213PD Z18, u2, o        \
	VFMADD213PD Z19, u2, e        \
	VFMADD213PD Z20, u2, o        \
	VFMADD213PD Z21, u2, e        \
	VFMADD213PD Z22, u2, o        \
	VFMADD213PD Z23, u2, e        \
	VFMADD213PD Z24, u2, o        \
	VFMADD213PD Z25, u2, e        \
	VFMADD213PD Z26, u2, o        \
	VFMADD213PD Z27, u2, e        \
	VFMADD213PD Z28, u2, o        \
	VFMADD213PD Z29, u2, e        \
	VFMADD213PD Z30, u2, o        \
	VFMADD213PD Z31, u2, e        \
	VFMADD213PD e, u, o           \ // p = o·u + e
	VMULPD      o, v, o           \
	VPANDQ      Z14, v, e         \
	VPORQ       Z11, e, e         \ // copysign(1, v)
	VMOVAPD     e, K2, o          \
	VCVTPD2PS   o, oy             \
	VMOVUPS     oy, off(DI)

// func erf512(dst, src *float32, n int, c *erfCoefficients)
//
// n is a multiple of 8: 16 elements per iteration, then 8.
TEXT ·erf512(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVQ         c+24(FP), R8
	VBROADCASTSD 0(R8), Z15
	VBROADCASTSD 8(R8), Z16
	VBROADCASTSD 16(R8), Z17
	VBROADCASTSD 24(R8), Z18
	VBROADCASTSD 32(R8), Z19
	VBROADCASTSD 40(R8), Z20
	VBROADCASTSD 48(R8), Z21
	VBROADCASTSD 56(R8), Z22
	VBROADCASTSD 64(R8), Z23
	VBROADCASTSD 72(R8), Z24
	VBROADCASTSD 80(R8), Z25
	VBROADCASTSD 88(R8), Z26
	VBROADCASTSD 96(R8), Z27
	VBROADCASTSD 104(R8), Z28
	VBROADCASTSD 112(R8), Z29
	VBROADCASTSD 120(R8), Z30
	VBROADCASTSD 128(R8), Z31
	VBROADCASTSD 136(R8), Z10
	VBROADCASTSD 144(R8), Z11
	VBROADCASTSD 152(R8), Z12
	VBROADCASTSD 160(R8), Z13
	VBROADCASTSD 168(R8), Z14

erf16:
	CMPQ CX, $16
	JLT  erf8
	ERF8(0, Z0, Z1, Z2, Z3, Z4, Y4)
	ERF8(32, Z5, Z6, Z7, Z8, Z9, Y9)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  erf16

erf8:
	TESTQ CX, CX
	JZ    erfdone
	ERF8(0, Z0, Z1, Z2, Z3, Z4, Y4)

erfdone:
	VZEROUPPER
	RET

// EXP16 sets p = exp(x − shift) on 16 lanes (ExpShift); x is overwritten,
// n and r are work registers. Constants are in Z19, Z21–Z31 and shift in Z20 (expShift512).
#define EXP16(x, n, r, p) \
	VSUBPS       Z20, x, x  \
	VMAXPS       x, Z24, x  \ // clamp; a NaN x is kept
	VMINPS       x, Z25, x  \
	VMULPS       Z21, x, n  \
	VRNDSCALEPS  $0, n, n   \ // n = round(x·log₂e)
	VMOVAPS      x, r       \
	VFNMADD231PS Z22, n, r  \
	VFNMADD231PS Z23, n, r  \ // r = x − n·ln 2
	VMOVAPS      Z26, p     \
	VFMADD213PS  Z27, r, p  \
	VFMADD213PS  Z28, r, p  \
	VFMADD213PS  Z29, r, p  \
	VFMADD213PS  Z30, r, p  \
	VFMADD213PS  Z31, r, p  \
	VFMADD213PS  Z19, r, p  \
	VFMADD213PS  Z19, r, p  \ // e^r
	VSCALEFPS    n, p, p

// func expShift512(dst, src *float32, n int, shift float32, c *expConstants) float32
//
// 32 elements per iteration, then 16, then a masked tail; two
// accumulators (Z8, Z9) are summed across lanes at the end.
TEXT ·expShift512(SB), NOSPLIT, $0-44
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS shift+24(FP), Z20
	MOVQ         c+32(FP), R8
	VBROADCASTSS 0(R8), Z21
	VBROADCASTSS 4(R8), Z22
	VBROADCASTSS 8(R8), Z23
	VBROADCASTSS 12(R8), Z24
	VBROADCASTSS 16(R8), Z25
	VBROADCASTSS 20(R8), Z26
	VBROADCASTSS 24(R8), Z27
	VBROADCASTSS 28(R8), Z28
	VBROADCASTSS 32(R8), Z29
	VBROADCASTSS 36(R8), Z30
	VBROADCASTSS 40(R8), Z31
	VBROADCASTSS 44(R8), Z19
	VPXORD       Z8, Z8, Z8
	VPXORD       Z9, Z9, Z9

exp32:
	CMPQ    CX, $32
	JLT     exp16
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z4
	EXP16(Z0, Z1, Z2, Z3)
	EXP16(Z4, Z5, Z6, Z7)
	VMOVUPS Z3, (DI)
	VMOVUPS Z7, 64(DI)
	VADDPS  Z3, Z8, Z8
	VADDPS  Z7, Z9, Z9
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     exp32

exp16:
	CMPQ    CX, $16
	JLT     exptail
	VMOVUPS (SI), Z0
	EXP16(Z0, Z1, Z2, Z3)
	VMOVUPS Z3, (DI)
	VADDPS  Z3, Z8, Z8
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $16, CX
	JMP     exp16

exptail:
	TESTQ     CX, CX
	JZ        expdone
	MOVL      $1, AX
	SHLL      CX, AX
	DECL      AX
	KMOVW     AX, K1
	VMOVUPS.Z (SI), K1, Z0
	EXP16(Z0, Z1, Z2, Z3)
	VMOVUPS   Z3, K1, (DI)
	VADDPS    Z3, Z8, K1, Z8

expdone:
	VADDPS        Z9, Z8, Z8
	VEXTRACTF64X4 $1, Z8, Y9
	VADDPS        Y9, Y8, Y8
	VEXTRACTF128  $1, Y8, X9
	VADDPS        X9, X8, X8
	VPERMILPS     $0x4E, X8, X9
	VADDPS        X9, X8, X8
	VPERMILPS     $0xB1, X8, X9
	VADDPS        X9, X8, X8
	MOVSS         X8, ret+40(FP)
	VZEROUPPER
	RET
// func stride2512(dst, src *float32, n, taps int, idx *[16]int32, isMax bool)
//
// PoolStride2: for each block of 16 outputs, the even lanes of the 32
// floats at each tap's offset (VPERMT2PS with the index vector in Z30) are
// reduced into Z0, by maximum (NaN where either is, as max512) or sum; a
// short last block is stored under a mask.
TEXT ·stride2512(SB), NOSPLIT, $0-41
	MOVQ      dst+0(FP), DI
	MOVQ      src+8(FP), SI
	MOVQ      n+16(FP), CX
	MOVQ      taps+24(FP), DX
	MOVQ      idx+32(FP), R8
	MOVB      isMax+40(FP), R11
	VMOVDQU32 (R8), Z30
	MOVL      $0xFFFF, AX
	KMOVW     AX, K1

sblock:
	TESTQ CX, CX
	JLE   sdone
	CMPQ  CX, $16
	JGE   sfull
	MOVL  $1, AX
	SHLL  CX, AX
	DECL  AX
	KMOVW AX, K1

sfull:
	VMOVUPS   (SI), Z0
	VPERMT2PS 64(SI), Z30, Z0
	MOVQ      SI, R10
	MOVQ      DX, R9

stap:
	DECQ      R9
	JZ        sstore
	ADDQ      $4, R10
	VMOVUPS   (R10), Z1
	VPERMT2PS 64(R10), Z30, Z1
	TESTB     R11, R11
	JZ        ssum
	VMAXPS    Z1, Z0, Z2
	VCMPPS    $3, Z0, Z0, K2
	VMOVAPS   Z0, K2, Z2
	VMOVAPS   Z2, Z0
	JMP       stap

ssum:
	VADDPS Z1, Z0, Z0
	JMP    stap

sstore:
	VMOVUPS Z0, K1, (DI)
	ADDQ    $128, SI
	ADDQ    $64, DI
	SUBQ    $16, CX
	JMP     sblock

sdone:
	VZEROUPPER
	RET

// func padRows512(dst *float32, dstStride int, src *float32, srcStride int, rows, lo, hi, width int)
//
// PadRows: per row, zeros in [0, lo) and [hi, width) one at a time (they
// are a convolution's padding, a few columns), the copy 16 at a time and
// a masked tail.
TEXT ·padRows512(SB), NOSPLIT, $0-64
	MOVQ   dst+0(FP), DI
	MOVQ   dstStride+8(FP), R8
	SHLQ   $2, R8
	MOVQ   src+16(FP), SI
	MOVQ   srcStride+24(FP), R9
	SHLQ   $2, R9
	MOVQ   rows+32(FP), R10
	MOVQ   lo+40(FP), R11
	MOVQ   hi+48(FP), R12
	MOVQ   width+56(FP), R13

prow:
	TESTQ R10, R10
	JZ    pdone
	XORQ  AX, AX

pzlo:
	CMPQ AX, R11
	JGE  pcopy
	MOVL $0, (DI)(AX*4)
	INCQ AX
	JMP  pzlo

pcopy:
	MOVQ R12, CX
	SUBQ R11, CX
	LEAQ (DI)(R11*4), DX
	MOVQ SI, BX

pc16:
	CMPQ    CX, $16
	JLT     pctail
	VMOVUPS (BX), Z0
	VMOVUPS Z0, (DX)
	ADDQ    $64, BX
	ADDQ    $64, DX
	SUBQ    $16, CX
	JMP     pc16

pctail:
	TESTQ     CX, CX
	JLE       pzhi
	MOVL      $1, AX
	SHLL      CX, AX
	DECL      AX
	KMOVW     AX, K1
	VMOVUPS.Z (BX), K1, Z0
	VMOVUPS   Z0, K1, (DX)

pzhi:
	MOVQ R12, AX

pzhi1:
	CMPQ AX, R13
	JGE  pnext
	MOVL $0, (DI)(AX*4)
	INCQ AX
	JMP  pzhi1

pnext:
	ADDQ R8, DI
	ADDQ R9, SI
	DECQ R10
	JMP  prow

pdone:
	VZEROUPPER
	RET
