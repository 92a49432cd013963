package cluster

import (
	"errors"
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

// Peak is the device's peak FLOP/s for products and convolutions in p; 0
// where it has none. fp32 is the plain peak without tensor cores.
func (d Device) Peak(p Precision) float64 {
	switch p {
	case BF16:
		return d.PeakBF16
	case FP16:
		return d.PeakFP16
	case TF32:
		return d.PeakTF32
	}
	return d.PeakFLOPS
}

// Has reports whether the device has a peak for p.
func (d Device) Has(p Precision) bool { return d.Peak(p) > 0 }

// DefaultPrecision is the precision the planner prices a device in unless
// told: its best 16-bit mixed precision, as users train (bf16 where it has
// it, fp16 on a V100), else fp32.
func (d Device) DefaultPrecision() Precision {
	for _, p := range []Precision{BF16, FP16} {
		if d.Has(p) {
			return p
		}
	}
	return FP32
}

// ErrNoPeak marks a precision the device has no peak for.
var ErrNoPeak = errors.New("no peak for this precision")

// CheckPrecision refuses a precision the device has no peak for.
func (d Device) CheckPrecision(p Precision) error {
	if d.Has(p) {
		return nil
	}
	var has []string
	for _, q := range Precisions {
		if d.Has(q) {
			has = append(has, string(q))
		}
	}
	return fmt.Errorf("precision %s: the %s has no %s peak (it has %s): %w", p, d.Name, p, strings.Join(has, ", "), ErrNoPeak)
}
