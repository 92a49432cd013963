//go:build !purego

package gemm

func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
func xgetbv() (eax, edx uint32)

func init() {
	switch {
	case hasAVX512():
		defaultKernels = avx512Kernels()
	case hasAVX2FMA():
		defaultKernels = avx2Kernels()
	}
}

// avx512Kernels returns the generated AVX-512 kernels (kernels_amd64.s):
// tiles of up to 14×32, 16×16 transposes. Costs measured on Zen 5.
func avx512Kernels() *kernelSet {
	return &kernelSet{
		name: "avx512", mr: 14, nr: 32, maskedB: true,
		ar2: avx512AR2, ar1: avx512AR1, ak2: avx512AK2, ak1: avx512AK1,
		transpose16: transpose16, packCycles: 0.35, transposeCycles: 0.55,
		addMax: addMax512, vmax: max512, arith: arith512, erf: erf512, expShift: expShift512,
		stride2: stride2512, padRows: padRows512,
	}
}

// avx2Kernels returns the generated AVX2+FMA kernels: tiles of up to
// 6×16; transposes are left to Go.
func avx2Kernels() *kernelSet {
	return &kernelSet{
		name: "avx2", mr: 6, nr: 16,
		ar2: avx2AR2, ar1: avx2AR1, ak2: avx2AK2, ak1: avx2AK1,
		packCycles: 2, transposeCycles: 2,
	}
}

// hasAVX2FMA reports whether the CPU has AVX2, FMA and POPCNT and the
// operating system saves the ymm registers.
func hasAVX2FMA() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const fma, popcnt, osxsave, avx = 1 << 12, 1 << 23, 1 << 27, 1 << 28
	if ecx1&(fma|popcnt|osxsave|avx) != fma|popcnt|osxsave|avx {
		return false
	}
	if xcr0, _ := xgetbv(); xcr0&6 != 6 {
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	const avx2 = 1 << 5
	return ebx7&avx2 != 0
}

// hasAVX512 reports whether the CPU has AVX-512F and the operating system
// saves the opmask and zmm registers on context switch (XCR0 bits 1, 2, 5,
// 6, 7). The kernels need nothing beyond AVX512F: zmm arithmetic,
// broadcasts, opmask loads and stores, VUNPCK*, VSHUFF32X4.
func hasAVX512() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const osxsave = 1 << 27
	if ecx1&osxsave == 0 {
		return false
	}
	xcr0, _ := xgetbv()
	const zmmState = 1<<1 | 1<<2 | 1<<5 | 1<<6 | 1<<7
	if xcr0&zmmState != zmmState {
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	const avx512f = 1 << 16
	return ebx7&avx512f != 0
}
