//go:build !purego

#include "textflag.h"

// func addMax512(dst, src *float32, n int, b, lo float32)
//
// dst[i] = max(src[i] + b, lo): 64 elements per iteration, then 16, then
// a masked tail. VMAXPS takes lo as its first source and the sum as its
// second, which it returns when either is NaN, so NaN sums pass through.
TEXT ·addMax512(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS b+24(FP), Z1
	VBROADCASTSS lo+28(FP), Z2

loop64:
	CMPQ    CX, $64
	JLT     loop16
	VADDPS  (SI), Z1, Z3
	VADDPS  64(SI), Z1, Z4
	VADDPS  128(SI), Z1, Z5
	VADDPS  192(SI), Z1, Z6
	VMAXPS  Z3, Z2, Z3
	VMAXPS  Z4, Z2, Z4
	VMAXPS  Z5, Z2, Z5
	VMAXPS  Z6, Z2, Z6
	VMOVUPS Z3, (DI)
	VMOVUPS Z4, 64(DI)
	VMOVUPS Z5, 128(DI)
	VMOVUPS Z6, 192(DI)
	ADDQ    $256, SI
	ADDQ    $256, DI
	SUBQ    $64, CX
	JMP     loop64

loop16:
	CMPQ    CX, $16
	JLT     tail
	VADDPS  (SI), Z1, Z3
	VMAXPS  Z3, Z2, Z3
	VMOVUPS Z3, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $16, CX
	JMP     loop16

tail:
	TESTQ     CX, CX
	JZ        done
	MOVL      $1, AX
	SHLL      CX, AX
	DECL      AX
	KMOVW     AX, K1
	VMOVUPS.Z (SI), K1, Z3
	VADDPS    Z3, Z1, Z3
	VMAXPS    Z3, Z2, Z3
	VMOVUPS   Z3, K1, (DI)

done:
	VZEROUPPER
	RET

// func max512(dst, x, y *float32, n int)
//
// dst[i] = max(x[i], y[i]), 16 elements per iteration and a masked tail.
// VMAXPS returns its second source when either is NaN, which keeps y's
// NaNs; lanes where x is NaN (VCMPPS unordered) take x.
TEXT ·max512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX

max16:
	CMPQ     CX, $16
	JLT      maxtail
	VMOVUPS  (SI), Z1
	VMAXPS   (DX), Z1, Z3
	VCMPPS   $3, Z1, Z1, K2
	VMOVUPS  Z1, K2, Z3
	VMOVUPS  Z3, (DI)
	ADDQ     $64, SI
	ADDQ     $64, DX
	ADDQ     $64, DI
	SUBQ     $16, CX
	JMP      max16

maxtail:
	TESTQ     CX, CX
	JZ        maxdone
	MOVL      $1, AX
	SHLL      CX, AX
	DECL      AX
	KMOVW     AX, K1
	VMOVUPS.Z (SI), K1, Z1
	VMOVUPS.Z (DX), K1, Z2
	VMAXPS    Z2, Z1, Z3
	VCMPPS    $3, Z1, Z1, K2
	VMOVUPS   Z1, K2, Z3
	VMOVUPS   Z3, K1, (DI)

maxdone:
	VZEROUPPER
	RET

// func arith512(dst, x, y *float32, n int, mul bool)
//
// dst[i] = x[i] + y[i], or x[i]·y[i] when mul: 64 elements per
// iteration, then 16, then a masked tail; the operation is chosen per
// iteration (a branch the predictor always gets right).
TEXT ·arith512(SB), NOSPLIT, $0-33
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	MOVB mul+32(FP), R8

ar64:
	CMPQ    CX, $64
	JLT     ar16
	VMOVUPS (SI), Z1
	VMOVUPS 64(SI), Z2
	VMOVUPS 128(SI), Z3
	VMOVUPS 192(SI), Z4
	TESTB   R8, R8
	JNZ     ar64mul
	VADDPS  (DX), Z1, Z1
	VADDPS  64(DX), Z2, Z2
	VADDPS  128(DX), Z3, Z3
	VADDPS  192(DX), Z4, Z4
	JMP     ar64store

ar64mul:
	VMULPS (DX), Z1, Z1
	VMULPS 64(DX), Z2, Z2
	VMULPS 128(DX), Z3, Z3
	VMULPS 192(DX), Z4, Z4

ar64store:
	VMOVUPS Z1, (DI)
	VMOVUPS Z2, 64(DI)
	VMOVUPS Z3, 128(DI)
	VMOVUPS Z4, 192(DI)
	ADDQ    $256, SI
	ADDQ    $256, DX
	ADDQ    $256, DI
	SUBQ    $64, CX
	JMP     ar64

ar16:
	MOVL $0xFFFF, AX
	KMOVW AX, K1
	CMPQ CX, $16
	JGE  ar16op
	TESTQ CX, CX
	JZ    ardone
	MOVL  $1, AX
	SHLL  CX, AX
	DECL  AX
	KMOVW AX, K1

ar16op:
	VMOVUPS.Z (SI), K1, Z1
	VMOVUPS.Z (DX), K1, Z2
	TESTB     R8, R8
	JNZ       ar16mul
	VADDPS    Z2, Z1, Z1
	JMP       ar16store

ar16mul:
	VMULPS Z2, Z1, Z1

ar16store:
	VMOVUPS Z1, K1, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, DI
	SUBQ    $16, CX
	JG      ar16

ardone:
	VZEROUPPER
	RET
