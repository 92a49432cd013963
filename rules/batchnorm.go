package rules

import "math"

// Batch normalisation as a CNN trains with it (PyTorch's BatchNorm2d in
// training mode, affine=False): each channel of an NCHW tensor is
// centred and scaled by statistics over the whole batch and image. The
// per-channel scale and shift that usually follow are element-wise
// products and sums, which every cut passes.
//
// Its statistics are why its layouts are few. A cut of the channels
// leaves each channel whole on one device, so each piece normalises on
// its own. A cut of the batch or of the image would give each device its
// own statistics: that is local ("ghost") batch normalisation, a
// different function, which is what data parallelism without SyncBatchNorm
// computes. Partial sums cannot be normalised before they are added.
// The input's Alone check refuses all three, so no rule can claim them.
//
// The float kernel is the normalisation, with PyTorch's ε = 1e-5 and the
// biased variance. The exact arithmetic has no square root, so its kernel
// divides the centred values by their sum of squares instead: like the
// normalisation, it needs every value of the channel and is neither
// additive nor local. batchnorm is marked piecewise, so every check of a
// rule with it draws floats too.

// batchNormEpsilon is PyTorch's and ONNX's default ε.
const batchNormEpsilon = 1e-5

// batchNormShape: an NCHW tensor gives one of the same shape and layout.
func batchNormShape(_ []int, in []Shape) ([]Shape, error) {
	if in[0].Rank != 4 {
		return nil, shapeErrorf("operand must be NCHW of rank 4, got %s", in[0])
	}
	return []Shape{in[0]}, nil
}

// channelValues calls visit once per channel of an NCHW tensor with the
// offsets of its values: batch after batch, one contiguous plane each.
func channelValues(s Shape, visit func(planes []int, plane int)) {
	n, c, plane := s.Dims[0], s.Dims[1], s.Dims[2]*s.Dims[3]
	starts := make([]int, n)
	for ch := range c {
		for b := range n {
			starts[b] = (b*c + ch) * plane
		}
		visit(starts, plane)
	}
}

// batchNormExact centres each channel and divides it by its sum of
// squares; a channel whose values are all equal becomes zeros.
func batchNormExact(_ []int, in, out []*Tensor[uint32]) {
	var r Mod
	x, y := in[0], out[0]
	channelValues(x.Shape, func(starts []int, plane int) {
		sum := uint32(0)
		for _, s := range starts {
			for _, v := range x.Data[s : s+plane] {
				sum = r.Add(sum, v)
			}
		}
		negSum := uint32(0)
		if sum != 0 {
			negSum = Prime - sum
		}
		negMean := r.Mul(negSum, r.Recip(len(starts)*plane))
		squares := uint32(0)
		for _, s := range starts {
			for i, v := range x.Data[s : s+plane] {
				e := r.Add(v, negMean)
				y.Data[s+i] = e
				squares = r.Add(squares, r.Mul(e, e))
			}
		}
		inv := uint32(0)
		if squares != 0 {
			inv = modInverse(uint64(squares))
		}
		for _, s := range starts {
			for i := range plane {
				y.Data[s+i] = r.Mul(y.Data[s+i], inv)
			}
		}
	})
}

// batchNormFloat is (x − mean) / √(variance + ε) per channel, the
// variance biased, as PyTorch normalises in training.
func batchNormFloat(_ []int, in, out []*Tensor[float64]) {
	x, y := in[0], out[0]
	channelValues(x.Shape, func(starts []int, plane int) {
		m := float64(len(starts) * plane)
		sum := 0.0
		for _, s := range starts {
			for _, v := range x.Data[s : s+plane] {
				sum += v
			}
		}
		mean := sum / m
		squares := 0.0
		for _, s := range starts {
			for _, v := range x.Data[s : s+plane] {
				squares += (v - mean) * (v - mean)
			}
		}
		scale := 1 / math.Sqrt(squares/m+batchNormEpsilon)
		for _, s := range starts {
			for i, v := range x.Data[s : s+plane] {
				y.Data[s+i] = (v - mean) * scale
			}
		}
	})
}
