package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"rulebook/runtime/cuda"
)

// cudaGraphs is a session's capture state: the graphs captured, by the
// input shapes they were captured for, and the shapes run once, plainly,
// so that cuBLAS and cuDNN have made their lazy allocations before a
// capture (which would record, not run, them).
type cudaGraphs struct {
	// reason is why the session does not capture; "" when it does.
	reason  string
	warm    map[string]bool
	byShape map[string]*cuda.Graph
}

// captureReason says why the session cannot capture, or "".
func (s *CUDASession) captureReason() string {
	c, ok := s.dev.(cuda.Capturer)
	switch {
	case !ok:
		return "the backend cannot capture"
	case c.CaptureError() != nil:
		return c.CaptureError().Error()
	case s.opt.noGraphs:
		return "RULEBOOK_CUDA_GRAPHS=0"
	case s.opt.syncEachNode:
		return "RULEBOOK_CUDA_SYNC=1 waits for the GPU after every node"
	case len(s.fallbacks) > 0:
		return fmt.Sprintf("%d nodes run on the CPU mid-run (the fallbacks), which a graph cannot hold", len(s.fallbacks))
	case !slices.ContainsFunc(s.steps, func(st func() error) bool { return st != nil }):
		return "the model queues no GPU work"
	}
	return ""
}

// runGraph queues the model's work: plainly on the first Run of a
// shape, captured on the second, replayed from then on.
func (s *CUDASession) runGraph(ctx context.Context) error {
	if s.graphs.reason != "" {
		return s.runSteps(ctx)
	}
	c := s.dev.(cuda.Capturer)
	key := s.inputShapes()
	g := s.graphs.byShape[key]
	if g == nil {
		if !s.graphs.warm[key] {
			if s.graphs.warm == nil {
				s.graphs.warm = map[string]bool{}
			}
			s.graphs.warm[key] = true
			return s.runSteps(ctx)
		}
		var err error
		if g, err = s.capture(ctx, c); g == nil {
			return err
		}
		if s.graphs.byShape == nil {
			s.graphs.byShape = map[string]*cuda.Graph{}
		}
		s.graphs.byShape[key] = g
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("stopped before the graph: %w", err)
	}
	if err := c.Replay(g); err != nil {
		return fmt.Errorf("replaying the graph of %s: %w", key, err)
	}
	return nil
}

// capture records the steps as a graph. When the capture fails, the
// session stops capturing, says why (Notes), and runs the steps plainly:
// a graph is only an optimisation. It returns a nil graph then.
func (s *CUDASession) capture(ctx context.Context, c cuda.Capturer) (*cuda.Graph, error) {
	if err := c.BeginCapture(); err != nil {
		s.graphs.reason = "the capture failed: " + err.Error()
		return nil, s.runSteps(ctx)
	}
	if err := s.runSteps(ctx); err != nil {
		if g, endErr := c.EndCapture(); endErr == nil {
			c.DestroyGraph(g)
		}
		if ctx.Err() != nil {
			return nil, err
		}
		s.graphs.reason = "the capture failed: " + err.Error()
		return nil, s.runSteps(ctx)
	}
	g, err := c.EndCapture()
	if err != nil {
		s.graphs.reason = "the capture failed: " + err.Error()
		return nil, s.runSteps(ctx)
	}
	return g, nil
}

// runSteps queues every node's work in order.
func (s *CUDASession) runSteps(ctx context.Context) error {
	m := s.model
	for i, step := range s.steps {
		if err := ctx.Err(); err != nil {
			s.dev.Synchronize()
			return fmt.Errorf("stopped before node %d (%s %q): %w", i, m.nodes[i].op, m.nodes[i].name, err)
		}
		if step == nil {
			continue
		}
		err := step()
		if err == nil && s.opt.syncEachNode {
			err = s.dev.Synchronize()
		}
		if err != nil {
			return fmt.Errorf("node %d (%s %q): %w", i, m.nodes[i].op, m.nodes[i].name, err)
		}
	}
	return nil
}

// inputShapes keys the graphs: the shapes of the graph inputs.
func (s *CUDASession) inputShapes() string {
	key := ""
	for _, id := range s.model.inputs {
		key += fmt.Sprint(s.model.values[id].shape)
	}
	return key
}

// destroy releases the graphs.
func (g *cudaGraphs) destroy(dev cuda.Backend) error {
	c, ok := dev.(cuda.Capturer)
	if !ok {
		return nil
	}
	var errs []error
	for _, gr := range g.byShape {
		errs = append(errs, c.DestroyGraph(gr))
	}
	g.byShape = nil
	return errors.Join(errs...)
}

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
// operator, a Relu fused into the convolution before it, or a node fused
// into a product's epilogue.
func (s *CUDASession) isView(n *node) bool {
	if _, ok := n.kernel.(viewKernel); ok {
		return true
	}
	if _, ok := s.absorbed[n]; ok {
		return true
	}
	return s.fusedRelu[n] && isRelu(n.kernel)
}

// viewInput is the value whose buffer a view's output is: its first
// input, or for a node fused into a product's epilogue, what it read
// of the product.
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
