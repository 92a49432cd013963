package cuda

import (
	"errors"
	"fmt"
	"strings"
)

// Capturer is a Backend that can record the work queued on its stream
// as a graph and replay it: one launch of the graph instead of one per
// kernel, which is what small kernels at high rates spend their time
// on. Between BeginCapture and EndCapture the work queued is recorded,
// not run, and nothing that waits for the stream (DeviceToHost,
// Synchronize, Time) or copies from the host may be called; a graph
// reads and writes the very buffers it was captured with.
type Capturer interface {
	// CaptureError is nil when capture works, else why not.
	CaptureError() error
	BeginCapture() error
	// EndCapture stops recording and returns the graph, ready to
	// replay; on an error the capture is over and nothing was run.
	EndCapture() (*Graph, error)
	// Replay queues the graph's work.
	Replay(g *Graph) error
	// DestroyGraph releases the graph (Close releases those left).
	DestroyGraph(g *Graph) error
}

// Graph is captured work: a CUDA graph and its executable instance on
// the GPU, the recorded launches in the emulator.
type Graph struct {
	graph, exec uintptr
	ops         []func() error
}

// CU_STREAM_CAPTURE_MODE_RELAXED: a goroutine moves between OS threads
// between calls, so the thread-local mode's checks would watch an
// arbitrary thread, and the global mode would fail another session's
// allocations made meanwhile. A session allocates nothing while it
// captures, so the checks would find nothing to stop.
const captureModeRelaxed = 2

// CaptureError says whether the driver has the graph API.
func (c *Context) CaptureError() error {
	if len(c.drv.missingGraph) > 0 {
		return fmt.Errorf("%w: the NVIDIA driver library lacks %s (older than CUDA 11.4?)", ErrUnavailable, strings.Join(c.drv.missingGraph, ", "))
	}
	return nil
}

// BeginCapture starts recording the stream.
func (c *Context) BeginCapture() error {
	if err := c.CaptureError(); err != nil {
		return err
	}
	leave, err := c.enter()
	if err != nil {
		return err
	}
	defer leave()
	if c.capturing {
		return errors.New("cuda: BeginCapture: a capture is already under way")
	}
	if rc := c.drv.cuStreamBeginCapture(c.stream, captureModeRelaxed); rc != 0 {
		return c.fail("cuStreamBeginCapture_v2", rc)
	}
	c.capturing = true
	return nil
}

// EndCapture stops recording and instantiates the graph.
func (c *Context) EndCapture() (*Graph, error) {
	leave, err := c.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	if !c.capturing {
		return nil, errors.New("cuda: EndCapture: no capture is under way")
	}
	c.capturing = false
	var graph, exec uintptr
	if rc := c.drv.cuStreamEndCapture(c.stream, &graph); rc != 0 {
		if graph != 0 {
			c.drv.cuGraphDestroy(graph)
		}
		return nil, c.fail("cuStreamEndCapture", rc)
	}
	if rc := c.drv.cuGraphInstantiateWithFlags(&exec, graph, 0); rc != 0 {
		c.drv.cuGraphDestroy(graph)
		return nil, c.fail("cuGraphInstantiateWithFlags", rc)
	}
	g := &Graph{graph: graph, exec: exec}
	c.graphs[g] = true
	return g, nil
}

// Replay queues the graph on the stream.
func (c *Context) Replay(g *Graph) error {
	leave, err := c.enter()
	if err != nil {
		return err
	}
	defer leave()
	if !c.graphs[g] {
		return errors.New("cuda: Replay: not a live graph of this context")
	}
	if rc := c.drv.cuGraphLaunch(g.exec, c.stream); rc != 0 {
		return c.fail("cuGraphLaunch", rc)
	}
	return nil
}

// DestroyGraph releases a graph and its instance.
func (c *Context) DestroyGraph(g *Graph) error {
	leave, err := c.enter()
	if err != nil {
		return err
	}
	defer leave()
	if !c.graphs[g] {
		return errors.New("cuda: DestroyGraph: not a live graph of this context")
	}
	delete(c.graphs, g)
	return errors.Join(c.destroyGraph(g)...)
}

func (c *Context) destroyGraph(g *Graph) []error {
	var errs []error
	if rc := c.drv.cuGraphExecDestroy(g.exec); rc != 0 {
		errs = append(errs, c.fail("cuGraphExecDestroy", rc))
	}
	if rc := c.drv.cuGraphDestroy(g.graph); rc != 0 {
		errs = append(errs, c.fail("cuGraphDestroy", rc))
	}
	return errs
}

// closeGraphs destroys the graphs left (Close holds the context).
func (c *Context) closeGraphs() []error {
	var errs []error
	for g := range c.graphs {
		errs = append(errs, c.destroyGraph(g)...)
	}
	c.graphs = nil
	return errs
}

// notCapturing refuses calls that wait for the stream during a capture.
func (c *Context) notCapturing(call string) error {
	if c.capturing {
		return fmt.Errorf("cuda: %s while the stream is being captured", call)
	}
	return nil
}

var (
	_ Convolver = (*Context)(nil)
	_ Capturer  = (*Context)(nil)
)
