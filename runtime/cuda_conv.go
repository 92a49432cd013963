package runtime

import (
	"fmt"

	"rulebook/runtime/cuda"
)

// A CUDA session's convolutions through cuDNN (the backend's Convolver),
// the Relu fused into them, and which nodes are views of another's
// output because of such fusions.

// convolver returns the backend's convolution entry, or nil and why
// there is none.
func (s *CUDASession) convolver() (cuda.Convolver, string) {
	c, ok := s.dev.(cuda.Convolver)
	switch {
	case s.opt.im2col:
		return nil, "asked for by the session's options"
	case !ok:
		return nil, "the backend has no convolution entry"
	case c.ConvError() != nil:
		return nil, c.ConvError().Error()
	}
	return c, ""
}

// cudnnPads reports whether cuDNN's padding, the same on both sides,
// gives k's output: then it computes the same windows, since a pad
// past the last window is never read.
func cudnnPads(k *convKernel) bool {
	return cuda.ConvOutput(k.height, k.kh, k.pt, k.sh, k.dh) == k.outH &&
		cuda.ConvOutput(k.width, k.kw, k.pl, k.sw, k.dw) == k.outW
}

// reluFusions finds the Relu nodes that are a cuDNN convolution's only
// reader: the convolution applies the ReLU, and the Relu is a view of
// its output. The map holds both nodes of each pair.
func (s *CUDASession) reluFusions() map[*node]bool {
	m := s.model
	if conv, _ := s.convolver(); conv == nil || s.opt.cpuOps["Conv"] || s.opt.cpuOps["Relu"] {
		return nil
	}
	readers := m.valueReaders()
	fused := map[*node]bool{}
	for _, n := range m.nodes {
		if !isRelu(n.kernel) || n.in[0] < 0 || readers.sole(n.in[0]) != n || readers.producer[n.in[0]] == nil {
			continue
		}
		conv := readers.producer[n.in[0]]
		if k, ok := conv.kernel.(*convKernel); ok && cudnnPads(k) {
			fused[conv], fused[n] = true, true
		}
	}
	return fused
}

// isView reports whether a node's output is its input's buffer: a view
// operator, or a node fused into the one before it (absorbed).
func (s *CUDASession) isView(n *node) bool {
	_, fused := s.absorbed[n]
	_, view := n.kernel.(viewKernel)
	return view || fused
}

// viewInput is the value whose buffer a view's output is: its first
// input, or for a fused node, what it read of the node it is fused
// into.
func (s *CUDASession) viewInput(n *node) int {
	if id, ok := s.absorbed[n]; ok {
		return id
	}
	return n.in[0]
}

// planCuDNNConv runs a convolution through the backend's Convolver
// (cuDNN), with a fused Relu where reluFusions found one. It returns nil
// where there is none, cuDNN's padding cannot express the node's, or
// cuDNN finds no algorithm for it (with a note); then the convolution is
// im2col + cuBLAS. Find runs here, before any buffer or capture exists.
func (s *CUDASession) planCuDNNConv(k *convKernel, n *node) *cudaNodePlan {
	conv, why := s.convolver()
	if conv == nil {
		s.note("Conv: im2col + cuBLAS, not cuDNN: " + why)
		return nil
	}
	if !cudnnPads(k) {
		s.note("Conv: im2col + cuBLAS where the padding differs between the sides of an axis (cuDNN pads both alike)")
		return nil
	}
	c := cuda.Convolution{Batch: k.batch, Channels: k.channels, Height: k.height, Width: k.width,
		Filters: k.filters, KernelH: k.kh, KernelW: k.kw, Groups: k.group, PadH: k.pt, PadW: k.pl,
		StrideH: k.sh, StrideW: k.sw, DilationH: k.dh, DilationW: k.dw, OutH: k.outH, OutW: k.outW,
		Relu: s.fusedRelu[n], Precision: s.opt.precision}
	if err := conv.PrepareConv(&c); err != nil {
		s.note(fmt.Sprintf("Conv %q: im2col + cuBLAS, cuDNN failed: %v", n.name, err))
		return nil
	}
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		cv := c
		cv.X, cv.Filter, cv.Y = in[0], in[1], out[0]
		if k.hasBias {
			cv.Bias = in[2]
		}
		return func() error { return conv.Conv(&cv) }, nil
	}}
}
