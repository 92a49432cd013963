//go:build !purego

package gemm

// extraKernelSets returns the slower kernels this CPU also runs, so that
// the tests cover them too.
func extraKernelSets() []*kernelSet {
	if defaultKernels.name == "avx512" && hasAVX2FMA() {
		return []*kernelSet{avx2Kernels()}
	}
	return nil
}
