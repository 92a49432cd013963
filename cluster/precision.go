package cluster

import (
	"fmt"
	"strings"
)

// Precision is the arithmetic a training step runs in, as PyTorch users
// choose it: plain fp32, fp32 with TF32 products, or bf16/fp16 mixed
// precision (autocast: products in 16 bits, weights and optimizer state
// in fp32).
type Precision string

// The precisions, in the order help texts list them.
const (
	BF16 Precision = "bf16"
	FP16 Precision = "fp16"
	TF32 Precision = "tf32"
	FP32 Precision = "fp32"
)

// Precisions lists every precision.
var Precisions = []Precision{BF16, FP16, TF32, FP32}

// ParsePrecision reads a precision's name.
func ParsePrecision(s string) (Precision, error) {
	for _, p := range Precisions {
		if string(p) == s {
			return p, nil
		}
	}
	names := make([]string, len(Precisions))
	for i, p := range Precisions {
		names[i] = string(p)
	}
	return "", fmt.Errorf("unknown precision %q (known: %s)", s, strings.Join(names, ", "))
}

// ActivationBytes is the size of one activation element computed in p:
// 16-bit mixed precision computes and saves activations in 16 bits.
func (p Precision) ActivationBytes() float64 {
	if p == BF16 || p == FP16 {
		return 2
	}
	return 4
}
