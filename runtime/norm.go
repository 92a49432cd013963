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
