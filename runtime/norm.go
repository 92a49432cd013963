package runtime

import (
	"fmt"
	"math"
	"slices"
)

// prepareBatchNormalization normalises per channel (dimension 1) with the
// given statistics, as in inference. Training mode, its extra outputs and
// the per-activation mode of opsets before 9 (spatial = 0) are not
// supported.
func prepareBatchNormalization(c *nodeContext) (prepared, error) {
	x := c.shape(0)
	a := &c.attrs
	if len(x) < 2 {
		return prepared{}, fmt.Errorf("input X %s needs a channel dimension", formatShape(x))
	}
	if a.int("training_mode", 0) != 0 || len(c.node.Outputs) > 1 && slices.ContainsFunc(c.node.Outputs[1:], func(s string) bool { return s != "" }) {
		return prepared{}, fmt.Errorf("training mode is not supported")
	}
	if c.opset < 9 && a.int("spatial", 1) == 0 {
		return prepared{}, fmt.Errorf("spatial = 0 is not supported")
	}
	for i, name := range []string{"scale", "B", "mean", "var"} {
		if s := c.shape(i + 1); !slices.Equal(s, x[1:2]) {
			return prepared{}, fmt.Errorf("%s %s must be [%d]", name, formatShape(s), x[1])
		}
	}
	k := &batchNormKernel{epsilon: a.float("epsilon", 1e-5), batch: x[0], channels: x[1], size: numElements(x[2:])}
	return prepared{kernel: k, outputs: [][]int{slices.Clone(x)}}, nil
}

type batchNormKernel struct {
	epsilon               float32
	batch, channels, size int
}

func (k *batchNormKernel) bind(in, out []*Tensor, e *env) func() {
	body := func(lo, hi int) {
		scale, bias, mean, variance := in[1].Data, in[2].Data, in[3].Data, in[4].Data
		for p := lo; p < hi; p++ {
			ch := p % k.channels
			s := float32(float64(scale[ch]) / math.Sqrt(float64(variance[ch])+float64(k.epsilon)))
			b := bias[ch] - mean[ch]*s
			src, dst := in[0].Data[p*k.size:(p+1)*k.size], out[0].Data[p*k.size:(p+1)*k.size]
			for i, v := range src {
				dst[i] = v*s + b
			}
		}
	}
	return func() { e.workers.parallelFor(k.batch*k.channels, max(1, elementGrain/max(k.size, 1)), body) }
}

// prepareLayerNormalization normalises over the dimensions from axis to
// the last (opset 17), with scale and an optional bias broadcast over
// them. The optional Mean and InvStdDev outputs keep the normalised
// dimensions as ones.
func prepareLayerNormalization(c *nodeContext) (prepared, error) {
	x := c.shape(0)
	a := &c.attrs
	axis, err := normalizeAxis(a.int("axis", -1), len(x))
	if err != nil {
		return prepared{}, err
	}
	if a.int("stash_type", 1) != 1 {
		return prepared{}, fmt.Errorf("stash_type %d is not supported (float32 statistics only)", a.int("stash_type", 1))
	}
	norm := x[axis:]
	for i, name := range []string{"Scale", "B"} {
		if s := c.shape(i + 1); c.has(i+1) && numElements(s) != numElements(norm) {
			return prepared{}, fmt.Errorf("%s %s does not match the normalised dimensions %s", name, formatShape(s), formatShape(norm))
		}
	}
	k := &layerNormKernel{epsilon: a.float("epsilon", 1e-5), rows: numElements(x[:axis]), size: numElements(norm), bias: c.has(2)}
	stats := slices.Clone(x)
	for i := axis; i < len(stats); i++ {
		stats[i] = 1
	}
	outputs := [][]int{slices.Clone(x)}
	for range c.node.Outputs[1:] {
		outputs = append(outputs, slices.Clone(stats))
	}
	return prepared{kernel: k, outputs: outputs}, a.err
}

type layerNormKernel struct {
	epsilon    float32
	rows, size int
	bias       bool
}

func (k *layerNormKernel) bind(in, out []*Tensor, e *env) func() {
	body := func(lo, hi int) {
		scale := in[1].Data
		var bias []float32
		if k.bias {
			bias = in[2].Data
		}
		for r := lo; r < hi; r++ {
			src, dst := in[0].Data[r*k.size:(r+1)*k.size], out[0].Data[r*k.size:(r+1)*k.size]
			var sum, sq float64
			for _, v := range src {
				sum += float64(v)
			}
			mean := sum / float64(k.size)
			for _, v := range src {
				d := float64(v) - mean
				sq += d * d
			}
			inv := 1 / math.Sqrt(sq/float64(k.size)+float64(k.epsilon))
			if len(out) > 1 && out[1] != nil {
				out[1].Data[r] = float32(mean)
			}
			if len(out) > 2 && out[2] != nil {
				out[2].Data[r] = float32(inv)
			}
			for i, v := range src {
				y := float32((float64(v)-mean)*inv) * scale[i]
				if bias != nil {
					y += bias[i]
				}
				dst[i] = y
			}
		}
	}
	return func() { e.workers.parallelFor(k.rows, max(1, elementGrain/max(k.size, 1)), body) }
}
