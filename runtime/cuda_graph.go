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
