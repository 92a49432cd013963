//go:build purego || !amd64

package gemm

func extraKernelSets() []*kernelSet { return nil }
