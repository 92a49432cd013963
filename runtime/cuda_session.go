package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	goruntime "runtime"
	"slices"
	"sync"
	"time"

	"rulebook/runtime/cuda"
	"rulebook/timing"
)

// CUDASession executes a Model on an NVIDIA GPU. Like Session it plans
// device buffers once (an intermediate's buffer is reused after its last
// reader; graph outputs keep theirs), uploads the constants once and
// binds every node to its buffers and kernel arguments, so that a Run
// uploads the inputs, queues the kernels and cuBLAS products on one
// stream, and downloads the outputs, allocating nothing on the device.
//
// Reshape, Flatten, Squeeze, Unsqueeze, Identity and Dropout are views:
// their output shares the input's device buffer, as does a Cast of an
// activation. Every other node has a GPU kernel (see CUDAOps), except one
// whose shapes the kernels do not take: it runs its CPU kernel between a
// download of its inputs and an upload of its outputs, and Fallbacks
// lists it with the reason.
//
// Convolutions go to cuDNN where the backend has it (cuda.Convolver),
// a Relu that alone reads a convolution's output fused into it; else
// they are im2col + cuBLAS, and Notes says why. Where the backend can
// capture (cuda.Capturer) and no node falls back to the CPU, the second
// Run records the queued work as a graph, and later Runs replay it
// between the copies of the inputs and outputs, which stay outside it.
//
// Methods may be called from several goroutines; they run one at a time.
// Close releases the device memory and the CUDA context.
type CUDASession struct {
	model *Model
	mu    sync.Mutex
	dev   cuda.Backend
	res   *cudaResources
	opt   cudaOptions
	// root maps each value to the value whose buffer it uses: itself, or
	// for the output of a view, the root of the view's input.
	root []int
	// ptr holds, per root value, its device address (0 when it has none:
	// empty, or a constant only CPU fallbacks read).
	ptr       []cuda.Ptr
	plans     []*cudaNodePlan
	steps     []func() error // per node; nil for a view
	fallbacks []string
	// notes say where the session runs slower than it could, and why
	// (Notes adds graph capture's reason).
	notes []string
	// fusedRelu marks each Conv whose only reader, a Relu, is fused into
	// it, and that Relu.
	fusedRelu map[*node]bool
	// epilogues are the products whose bias and activation the backend's
	// epilogue applies.
	epilogues map[*node]*productEpilogue
	// absorbed maps each node fused into the node before it (a Conv's
	// Relu, a product's bias and activation) to the value whose buffer
	// its output is: it is a view of it.
	absorbed map[*node]int
	scratch  cuda.Ptr // im2col workspace shared by all Conv nodes
	env      *env     // for CPU fallbacks
	graphs   cudaGraphs
	closed   bool
}

// cudaOptions steer a CUDA session; NewCUDASession takes them from the
// environment (RULEBOOK_CUDA_SYNC=1 synchronises after every node, so that
// a failing kernel is named), tests set them directly.
type cudaOptions struct {
	// cpuOps are op types to run on the CPU even if they have a kernel.
	cpuOps map[string]bool
	// syncEachNode waits for the GPU after every node.
	syncEachNode bool
	// threads for CPU fallbacks; 0 means GOMAXPROCS.
	threads int
	// im2col keeps convolutions on im2col + cuBLAS where the backend
	// convolves (cuDNN).
	im2col bool
	// noGraphs runs plain launches where the backend could capture
	// (RULEBOOK_CUDA_GRAPHS=0).
	noGraphs bool
	// precision of the matrix products and convolutions.
	precision cuda.Precision
}

// CUDAOptions are what a caller chooses about a CUDA session.
type CUDAOptions struct {
	// Precision of the matrix products and convolutions (cuda.FP32 by
	// default); everything else computes in float32.
	Precision cuda.Precision
}

// cudaResources is what a session holds on the device and must give back.
type cudaResources struct {
	mu      sync.Mutex
	dev     cuda.Backend
	owned   bool // Close closes dev
	allocs  []cuda.Ptr
	workers *workers
	done    bool
}

func (r *cudaResources) alloc(bytes int) (cuda.Ptr, error) {
	if bytes == 0 {
		return 0, nil
	}
	p, err := r.dev.Alloc(bytes)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	r.allocs = append(r.allocs, p)
	r.mu.Unlock()
	return p, nil
}

// allocFloats allocates and uploads data (nothing for no data).
func (r *cudaResources) upload(data []float32) (cuda.Ptr, error) {
	p, err := r.alloc(4 * len(data))
	if err != nil || p == 0 {
		return p, err
	}
	return p, cuda.UploadFloats(r.dev, p, data)
}

func (r *cudaResources) uploadInt64s(data []int64) (cuda.Ptr, error) {
	p, err := r.alloc(8 * len(data))
	if err != nil || p == 0 {
		return p, err
	}
	return p, cuda.UploadInt64s(r.dev, p, data)
}

// free releases some allocations early (TimeNode's temporaries).
func (r *cudaResources) free(ps []cuda.Ptr) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, p := range ps {
		if p == 0 {
			continue
		}
		if i := slices.Index(r.allocs, p); i >= 0 {
			r.allocs = slices.Delete(r.allocs, i, i+1)
			errs = append(errs, r.dev.Free(p))
		}
	}
	return errors.Join(errs...)
}

func (r *cudaResources) release() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return nil
	}
	r.done = true
	var errs []error
	for _, p := range r.allocs {
		errs = append(errs, r.dev.Free(p))
	}
	r.allocs = nil
	if r.workers != nil {
		r.workers.stop()
	}
	if r.owned {
		errs = append(errs, r.dev.Close())
	}
	return errors.Join(errs...)
}

// cudaNodePlan is one node prepared for the GPU: bind returns the node's
// computation over the given input and output buffers (by input and
// output index, 0 for an omitted or empty one).
type cudaNodePlan struct {
	// fallback is why the node runs on the CPU; "" when it runs on the GPU.
	fallback string
	// scratch is the im2col workspace it needs, in floats.
	scratch int
	bind    func(in, out []cuda.Ptr) (func() error, error)
}

// NewCUDASession opens the GPU and prepares the model for it. Without a
// usable GPU, driver, NVRTC or cuBLAS the error wraps cuda.ErrUnavailable
// and names the libraries tried.
func (m *Model) NewCUDASession() (*CUDASession, error) { return m.OpenCUDA(CUDAOptions{}) }

// OpenCUDA is NewCUDASession with options.
func (m *Model) OpenCUDA(o CUDAOptions) (*CUDASession, error) {
	dev, err := cuda.Open()
	if err != nil {
		return nil, fmt.Errorf("runtime: NewCUDASession: %w", err)
	}
	s, err := m.newCUDASession(dev, true, o.session())
	if err != nil {
		return nil, fmt.Errorf("runtime: NewCUDASession on %s: %w", dev.Device(), err)
	}
	return s, nil
}

// session is the options a session runs with: o's, and the environment's
// switches (RULEBOOK_CUDA_SYNC, RULEBOOK_CUDA_GRAPHS).
func (o CUDAOptions) session() cudaOptions {
	return cudaOptions{syncEachNode: os.Getenv("RULEBOOK_CUDA_SYNC") == "1", noGraphs: os.Getenv("RULEBOOK_CUDA_GRAPHS") == "0",
		precision: o.Precision}
}

// GPU is one GPU context that many sessions use in turn, such as
// the one-node models a measured search times: the kernels are compiled
// and loaded once, and cuBLAS's, cuBLASLt's and cuDNN's handles and
// algorithm choices are kept, where a session of its own would redo them
// all. Its sessions must not run at the same time.
type GPU struct {
	dev cuda.Backend
}

// OpenGPU opens the GPU; without one the error wraps
// cuda.ErrUnavailable.
func OpenGPU() (*GPU, error) {
	dev, err := cuda.Open()
	if err != nil {
		return nil, fmt.Errorf("runtime: OpenGPU: %w", err)
	}
	return &GPU{dev: dev}, nil
}

// Open prepares m for the device. Closing the session leaves the device
// open.
func (d *GPU) Open(m *Model, o CUDAOptions) (*CUDASession, error) {
	s, err := m.newCUDASession(d.dev, false, o.session())
	if err != nil {
		return nil, fmt.Errorf("runtime: a CUDA session on %s: %w", d.dev.Device(), err)
	}
	return s, nil
}

// Close releases the device; close its sessions first.
func (d *GPU) Close() error { return d.dev.Close() }

// newCUDASession prepares the model on a backend; owned says whether the
// session closes it.
func (m *Model) newCUDASession(dev cuda.Backend, owned bool, opt cudaOptions) (*CUDASession, error) {
	s := &CUDASession{model: m, dev: dev, opt: opt, res: &cudaResources{dev: dev, owned: owned}}
	if err := s.prepare(); err != nil {
		s.res.release()
		return nil, err
	}
	// A session dropped without Close still gives the device back.
	goruntime.AddCleanup(s, func(r *cudaResources) { r.release() }, s.res)
	return s, nil
}

func (s *CUDASession) prepare() error {
	m := s.model
	s.root = make([]int, len(m.values))
	for id := range s.root {
		s.root[id] = id
	}
	s.fusedRelu = s.reluFusions()
	var fromEpilogues map[*node]int
	s.epilogues, fromEpilogues = s.epilogueFusions()
	s.absorbed = map[*node]int{}
	for n := range s.fusedRelu {
		if isRelu(n.kernel) {
			s.absorbed[n] = n.in[0]
		}
	}
	maps.Copy(s.absorbed, fromEpilogues)
	for _, n := range m.nodes {
		if id := s.viewInput(n); s.isView(n) && id >= 0 {
			s.root[n.out[0]] = s.root[id]
		}
	}
	// Plan the nodes: kernels chosen, tables uploaded, fallbacks decided.
	s.plans = make([]*cudaNodePlan, len(m.nodes))
	fallbackScratch, scratch := 0, 0
	for i, n := range m.nodes {
		if s.isView(n) {
			continue
		}
		p, err := s.planNode(n)
		if err != nil {
			return fmt.Errorf("node %d (%s %q): %w", i, n.op, n.name, err)
		}
		if p.fallback != "" {
			s.fallbacks = append(s.fallbacks, fmt.Sprintf("node %d (%s %q): %s", i, n.op, n.name, p.fallback))
			if su, ok := n.kernel.(scratchUser); ok {
				fallbackScratch = max(fallbackScratch, su.scratchSize(s.fallbackThreads()))
			}
		}
		scratch = max(scratch, p.scratch)
		s.plans[i] = p
	}
	if len(s.fallbacks) > 0 {
		s.res.workers = newWorkers(s.fallbackThreads())
		s.env = &env{workers: s.res.workers, scratch: make([]float32, fallbackScratch)}
	}
	var err error
	if s.scratch, err = s.res.alloc(4 * scratch); err != nil {
		return err
	}
	if err := s.placeValues(); err != nil {
		return err
	}
	s.steps = make([]func() error, len(m.nodes))
	for i, n := range m.nodes {
		if s.plans[i] == nil {
			continue // a view: its output is its input's buffer
		}
		step, err := s.plans[i].bind(s.ptrsOf(n.in), s.ptrsOf(n.out))
		if err != nil {
			return fmt.Errorf("node %d (%s %q): %w", i, n.op, n.name, err)
		}
		s.steps[i] = step
	}
	s.graphs.reason = s.captureReason()
	return nil
}

// placeValues gives every root value its device buffer: constants that a
// GPU node reads are uploaded, graph inputs get their own buffers, and
// node outputs share buffers planned like Session's, except that graph
// outputs are never reused (Run reads them at the end).
func (s *CUDASession) placeValues() error {
	m := s.model
	s.ptr = make([]cuda.Ptr, len(m.values))
	onDevice := make([]bool, len(m.values))
	for i, n := range m.nodes {
		if s.plans[i] == nil || s.plans[i].fallback != "" {
			continue
		}
		for _, id := range n.in {
			if id >= 0 {
				onDevice[s.root[id]] = true
			}
		}
	}
	for _, ep := range s.epilogues {
		if ep.bias >= 0 {
			onDevice[s.root[ep.bias]] = true
		}
	}
	planned := make([]bool, len(m.values))
	for id, v := range m.values {
		if s.root[id] != id {
			continue
		}
		switch {
		case v.isConst():
			if onDevice[id] {
				p, err := s.res.upload(v.konst.Data)
				if err != nil {
					return fmt.Errorf("uploading constant %q: %w", v.name, err)
				}
				s.ptr[id] = p
			}
		case slices.Contains(m.inputs, id):
			p, err := s.res.alloc(4 * numElements(v.shape))
			if err != nil {
				return fmt.Errorf("input %q: %w", v.name, err)
			}
			s.ptr[id] = p
		default:
			planned[id] = true
		}
	}
	// Last use of each planned root; graph outputs live to the end.
	lastUse := make([]int, len(m.values))
	for i, n := range m.nodes {
		for _, id := range slices.Concat(n.in, n.out) {
			if id >= 0 && planned[s.root[id]] {
				lastUse[s.root[id]] = i
			}
		}
	}
	for _, id := range m.outputs {
		lastUse[s.root[id]] = len(m.nodes)
	}
	plan := bufferPlan{slotOf: make([]int, len(m.values))}
	for id := range plan.slotOf {
		plan.slotOf[id] = -1
	}
	var free []int
	for i, n := range m.nodes {
		for _, id := range n.out {
			if id >= 0 && planned[id] && s.root[id] == id {
				plan.slotOf[id], free = plan.take(free, numElements(m.values[id].shape))
			}
		}
		released := map[int]bool{}
		for _, id := range slices.Concat(n.in, n.out) {
			if id < 0 || !planned[s.root[id]] {
				continue
			}
			if r := s.root[id]; lastUse[r] == i && !released[r] && plan.slotOf[r] >= 0 {
				released[r] = true
				free = append(free, plan.slotOf[r])
			}
		}
	}
	slots := make([]cuda.Ptr, len(plan.sizes))
	for i, size := range plan.sizes {
		p, err := s.res.alloc(4 * size)
		if err != nil {
			return fmt.Errorf("buffer %d of %d floats: %w", i, size, err)
		}
		slots[i] = p
	}
	for id := range m.values {
		if planned[id] && plan.slotOf[id] >= 0 {
			s.ptr[id] = slots[plan.slotOf[id]]
		}
	}
	return nil
}

// ptrsOf returns the device buffers of values (0 for omitted ones).
func (s *CUDASession) ptrsOf(ids []int) []cuda.Ptr {
	out := make([]cuda.Ptr, len(ids))
	for i, id := range ids {
		if id >= 0 {
			out[i] = s.ptr[s.root[id]]
		}
	}
	return out
}

// Device describes the GPU the session runs on.
func (s *CUDASession) Device() cuda.Device { return s.dev.Device() }

// Fallbacks lists the nodes that run on the CPU, with the reason: an
// operator without a GPU kernel or a shape the kernels do not take.
func (s *CUDASession) Fallbacks() []string { return slices.Clone(s.fallbacks) }

// Notes list what the session goes without, and why: cuDNN for some or
// all convolutions (they are im2col + cuBLAS then), graph capture.
func (s *CUDASession) Notes() []string {
	notes := slices.Clone(s.notes)
	if s.graphs.reason != "" {
		notes = append(notes, "no CUDA graph: "+s.graphs.reason)
	}
	return notes
}

// note records a note once.
func (s *CUDASession) note(text string) {
	if !slices.Contains(s.notes, text) {
		s.notes = append(s.notes, text)
	}
}

// Run computes the graph outputs for the given inputs, which must match
// the model's input names and shapes. It allocates the returned tensors
// and nothing on the device.
func (s *CUDASession) Run(ctx context.Context, inputs map[string]*Tensor) (map[string]*Tensor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("runtime: Run: the CUDA session is closed")
	}
	m := s.model
	if err := m.checkInputs(inputs); err != nil {
		return nil, fmt.Errorf("runtime: Run: %w", err)
	}
	for _, id := range m.inputs {
		if err := cuda.UploadFloats(s.dev, s.ptr[s.root[id]], inputs[m.values[id].name].Data); err != nil {
			return nil, fmt.Errorf("runtime: Run: uploading input %q: %w", m.values[id].name, err)
		}
	}
	if err := s.runGraph(ctx); err != nil {
		return nil, fmt.Errorf("runtime: Run: %w", err)
	}
	results := make(map[string]*Tensor, len(m.outputs))
	for i, id := range m.outputs {
		v, r := m.values[id], m.values[s.root[id]]
		t := NewTensor(v.shape...)
		if r.isConst() {
			copy(t.Data, r.konst.Data)
		} else if err := cuda.DownloadFloats(s.dev, t.Data, s.ptr[s.root[id]]); err != nil {
			return nil, fmt.Errorf("runtime: Run: downloading output %q: %w", m.outputNames[i], err)
		}
		results[m.outputNames[i]] = t
	}
	if err := s.dev.Synchronize(); err != nil {
		return nil, fmt.Errorf("runtime: Run: %w", err)
	}
	return results, nil
}

// TimeNode runs node i (an index of Model.Nodes) alone repeat times on
// random inputs of its shapes (constant inputs keep their values) and
// returns the median device time of one run, measured with CUDA events.
// One untimed run warms up first. A view costs nothing; a CPU fallback
// costs its transfers and its CPU kernel.
func (s *CUDASession) TimeNode(ctx context.Context, i int, repeat int) (time.Duration, error) {
	m := s.model
	if err := m.checkNode(i); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errors.New("runtime: TimeNode: the CUDA session is closed")
	}
	n := m.nodes[i]
	var temps []cuda.Ptr
	defer func() { s.res.free(temps) }()
	in := make([]cuda.Ptr, len(n.in))
	for j, id := range n.in {
		switch {
		case id < 0:
		case m.values[s.root[id]].isConst() && s.ptr[s.root[id]] != 0:
			in[j] = s.ptr[s.root[id]]
		case m.values[s.root[id]].isConst():
			// Only a CPU fallback reads it, from the host.
		default:
			data := make([]float32, numElements(m.values[id].shape))
			fillUniform(data, streamSeed(uint64(i), m.values[id].name), 1)
			p, err := s.res.upload(data)
			if err != nil {
				return 0, fmt.Errorf("runtime: TimeNode: %w", err)
			}
			temps, in[j] = append(temps, p), p
		}
	}
	out := make([]cuda.Ptr, len(n.out))
	for j, id := range n.out {
		if id >= 0 {
			p, err := s.res.alloc(4 * numElements(m.values[id].shape))
			if err != nil {
				return 0, fmt.Errorf("runtime: TimeNode: %w", err)
			}
			temps, out[j] = append(temps, p), p
		}
	}
	step := func() error { return nil }
	if p := s.plans[i]; p != nil {
		st, err := p.bind(in, out)
		if err != nil {
			return 0, fmt.Errorf("runtime: TimeNode: %w", err)
		}
		if st != nil {
			step = st
		}
	}
	// The device's events time each run; the first, untimed, warms up.
	d, err := timing.Repeat(ctx, repeat, func() (time.Duration, error) {
		d, err := s.dev.Time(step)
		if err != nil {
			return 0, fmt.Errorf("node %d (%s %q): %w", i, n.op, n.name, err)
		}
		return d, nil
	})
	if err != nil {
		return 0, fmt.Errorf("runtime: TimeNode: %w", err)
	}
	return d, nil
}

// Close releases the session's device memory and, for a session from
// NewCUDASession, the CUDA context. The session cannot run afterwards.
func (s *CUDASession) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return errors.Join(s.graphs.destroy(s.dev), s.res.release())
}

// fallbackThreads is how many CPU threads run the nodes that fall back to
// the CPU.
func (s *CUDASession) fallbackThreads() int {
	if s.opt.threads > 0 {
		return s.opt.threads
	}
	return goruntime.GOMAXPROCS(0)
}
