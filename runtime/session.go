package runtime

import (
	"context"
	"fmt"
	goruntime "runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"rulebook/timing"
)

// SessionOptions configures a Session.
type SessionOptions struct {
	// Threads is the number of goroutines that share the work of a node;
	// 0 means runtime.GOMAXPROCS(0).
	Threads int
}

// Session executes a Model with buffers planned once. Its methods may be
// called from several goroutines; they run one at a time.
type Session struct {
	model   *Model
	mu      sync.Mutex
	workers *workers
	env     *env
	// tensors holds, per value id, the tensor a node reads or writes:
	// constants share the model's data, intermediates point into planned
	// buffers, and graph inputs and outputs are pointed at each Run's
	// memory.
	tensors []*Tensor
	steps   []func() // per step (fuse.go); nil for a view that shares its input's buffer
	// stepNodes holds, per step, the model node it ends with.
	stepNodes []int
	// fresh marks graph outputs computed straight into the tensors a Run
	// returns.
	fresh       []bool
	bufferBytes int
}

// valueRole says where a value's memory comes from in a session.
type valueRole int

const (
	roleUnused valueRole = iota
	roleConst
	roleInput
	roleOutput       // written by a node into memory returned by Run
	roleIntermediate // in a planned buffer
)

// NewSession plans buffers and binds every node to its tensors, fusing
// the runs of nodes fuse.go lists.
func (m *Model) NewSession(opt SessionOptions) (*Session, error) {
	return m.newSession(opt, true)
}

// newSession is NewSession with fusion optional, so that tests can check
// fused steps against the nodes they replace.
func (m *Model) newSession(opt SessionOptions, fuse bool) (*Session, error) {
	threads := opt.Threads
	if threads <= 0 {
		threads = goruntime.GOMAXPROCS(0)
	}
	if threads > 1024 {
		return nil, fmt.Errorf("runtime: NewSession: %d threads is too many", threads)
	}
	if size := m.scratchSize(threads); size > maxTensorElements {
		return nil, fmt.Errorf("runtime: NewSession: a node needs a workspace of %d floats", size)
	}
	s := &Session{model: m, workers: newWorkers(threads)}
	// The helper goroutines end when the session is collected.
	goruntime.AddCleanup(s, func(w *workers) { w.stop() }, s.workers)
	roles := m.valueRoles()
	steps := m.steps(roles, fuse)
	root := m.viewRoots(roles, steps)
	plan := planBuffers(m, roles, root, steps)
	if err := m.reserveSession(plan, m.scratchSize(threads)); err != nil {
		return nil, fmt.Errorf("runtime: NewSession: %w", err)
	}
	s.bufferBytes = 4 * plan.total()
	s.env = &env{workers: s.workers, scratch: make([]float32, m.scratchSize(threads))}
	s.makeTensors(roles, root, plan)
	s.bindSteps(root, steps)
	return s, nil
}

func (m *Model) valueRoles() []valueRole {
	roles := make([]valueRole, len(m.values))
	for _, n := range m.nodes {
		for _, id := range n.out {
			if id >= 0 {
				roles[id] = roleIntermediate
			}
		}
	}
	for _, id := range m.outputs {
		if roles[id] == roleIntermediate {
			roles[id] = roleOutput
		}
	}
	for _, id := range m.inputs {
		roles[id] = roleInput
	}
	for id, v := range m.values {
		if v.isConst() {
			roles[id] = roleConst
		}
	}
	return roles
}

// viewRoots maps each value to the value whose buffer it uses: itself, or
// for the output of a Reshape or Flatten of an intermediate, the root of
// that input.
func (m *Model) viewRoots(roles []valueRole, steps []step) []int {
	root := make([]int, len(m.values))
	for id := range root {
		root[id] = id
	}
	for _, st := range steps {
		if _, ok := st.kernel.(viewKernel); !ok {
			continue
		}
		in, out := st.in[0], st.out[0]
		if roles[in] == roleIntermediate && roles[out] == roleIntermediate {
			root[out] = root[in]
		}
	}
	return root
}

func (m *Model) scratchSize(threads int) int {
	size := 0
	for _, n := range m.nodes {
		if s, ok := n.kernel.(scratchUser); ok {
			size = max(size, s.scratchSize(threads))
		}
	}
	return size
}

// bufferPlan assigns intermediate values (by root) to shared buffers.
type bufferPlan struct {
	slotOf []int // per value id, for roots of intermediates; -1 otherwise
	sizes  []int // floats per buffer
}

func (p bufferPlan) total() int {
	t := 0
	for _, s := range p.sizes {
		t += s
	}
	return t
}

// planBuffers walks the steps in order, giving each new intermediate the
// smallest free buffer that holds it (or growing the largest free one, or
// adding one) and freeing a buffer after the last node that reads its
// value. A step's outputs are placed before its inputs are freed, so no
// step reads and writes the same buffer. Values inside fused steps get no
// buffer.
func planBuffers(m *Model, roles []valueRole, root []int, steps []step) bufferPlan {
	lastUse := make([]int, len(m.values))
	for id := range lastUse {
		lastUse[id] = -1
	}
	for i, n := range steps {
		for _, id := range slices.Concat(n.in, n.out) {
			if id >= 0 && roles[id] == roleIntermediate {
				lastUse[root[id]] = i
			}
		}
	}
	plan := bufferPlan{slotOf: make([]int, len(m.values))}
	for id := range plan.slotOf {
		plan.slotOf[id] = -1
	}
	var free []int
	for i, n := range steps {
		for _, id := range n.out {
			if id >= 0 && roles[id] == roleIntermediate && root[id] == id {
				plan.slotOf[id], free = plan.take(free, numElements(m.values[id].shape))
			}
		}
		for _, id := range slices.Concat(n.in, n.out) {
			if id < 0 || roles[id] != roleIntermediate {
				continue
			}
			if r := root[id]; lastUse[r] == i && plan.slotOf[r] >= 0 {
				free = append(free, plan.slotOf[r])
				plan.slotOf[r] = -plan.slotOf[r] - 2 // released; the slot stays recoverable
			}
		}
	}
	for id, s := range plan.slotOf {
		if s <= -2 {
			plan.slotOf[id] = -s - 2
		}
	}
	return plan
}

// take picks a buffer for size floats from the free list.
func (p *bufferPlan) take(free []int, size int) (int, []int) {
	best, largest := -1, -1
	for i, s := range free {
		if p.sizes[s] >= size && (best < 0 || p.sizes[s] < p.sizes[free[best]]) {
			best = i
		}
		if largest < 0 || p.sizes[s] > p.sizes[free[largest]] {
			largest = i
		}
	}
	pick := best
	if pick < 0 {
		pick = largest
	}
	if pick < 0 {
		p.sizes = append(p.sizes, size)
		return len(p.sizes) - 1, free
	}
	slot := free[pick]
	p.sizes[slot] = max(p.sizes[slot], size)
	return slot, slices.Delete(free, pick, pick+1)
}

func (s *Session) makeTensors(roles []valueRole, root []int, plan bufferPlan) {
	m := s.model
	buffers := make([][]float32, len(plan.sizes))
	for i, size := range plan.sizes {
		buffers[i] = make([]float32, size)
	}
	s.tensors = make([]*Tensor, len(m.values))
	s.fresh = make([]bool, len(m.values))
	for id, v := range m.values {
		switch roles[id] {
		case roleConst:
			s.tensors[id] = v.konst
		case roleIntermediate:
			s.tensors[id] = &Tensor{Shape: v.shape}
			if slot := plan.slotOf[root[id]]; slot >= 0 { // else inside a fused step
				s.tensors[id].Data = buffers[slot][:numElements(v.shape)]
			}
		case roleInput, roleOutput:
			s.tensors[id] = &Tensor{Shape: v.shape}
			s.fresh[id] = roles[id] == roleOutput
		}
	}
}

// bindSteps binds each step's kernel; a view whose output shares its
// input's buffer has nothing to do.
func (s *Session) bindSteps(root []int, steps []step) {
	s.steps = make([]func(), len(steps))
	s.stepNodes = make([]int, len(steps))
	for i, st := range steps {
		s.stepNodes[i] = st.node
		if _, ok := st.kernel.(viewKernel); ok && root[st.out[0]] != st.out[0] {
			continue
		}
		s.steps[i] = st.kernel.bind(s.tensorsOf(st.in), s.tensorsOf(st.out), s.env)
	}
}

func (s *Session) tensorsOf(ids []int) []*Tensor {
	out := make([]*Tensor, len(ids))
	for i, id := range ids {
		if id >= 0 {
			out[i] = s.tensors[id]
		}
	}
	return out
}

// Run computes the graph outputs for the given inputs, which must match
// the model's input names and shapes. It allocates the returned tensors
// and nothing else.
func (s *Session) Run(ctx context.Context, inputs map[string]*Tensor) (map[string]*Tensor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.attachInputs(inputs); err != nil {
		return nil, fmt.Errorf("runtime: Run: %w", err)
	}
	defer s.detach()
	m := s.model
	results := make(map[string]*Tensor, len(m.outputs))
	for i, id := range m.outputs {
		if s.fresh[id] && s.tensors[id].Data == nil {
			t := NewTensor(m.values[id].shape...)
			s.tensors[id].Data = t.Data
			results[m.outputNames[i]] = t
		}
	}
	for i, step := range s.steps {
		if err := ctx.Err(); err != nil {
			n := s.stepNodes[i]
			return nil, fmt.Errorf("runtime: Run: stopped before node %d (%s %q): %w", n, m.nodes[n].op, m.nodes[n].name, err)
		}
		if step != nil {
			step()
		}
	}
	// Outputs that are constants, inputs, or listed twice are copies.
	for i, id := range m.outputs {
		if _, done := results[m.outputNames[i]]; !done || !s.fresh[id] {
			t := NewTensor(m.values[id].shape...)
			copy(t.Data, s.tensors[id].Data)
			results[m.outputNames[i]] = t
		}
	}
	return results, nil
}

// attachInputs checks the inputs and points the input tensors at them.
func (s *Session) attachInputs(inputs map[string]*Tensor) error {
	m := s.model
	if err := m.checkInputs(inputs); err != nil {
		return err
	}
	for _, id := range m.inputs {
		s.tensors[id].Data = inputs[m.values[id].name].Data
	}
	return nil
}

// checkInputs checks a Run's inputs against the model's, for every
// backend: each present, of its shape and size, and no others.
func (m *Model) checkInputs(inputs map[string]*Tensor) error {
	for _, id := range m.inputs {
		v := m.values[id]
		t, ok := inputs[v.name]
		switch {
		case !ok || t == nil:
			return fmt.Errorf("input %q (shape %s) is missing", v.name, formatShape(v.shape))
		case !slices.Equal(t.Shape, v.shape):
			return fmt.Errorf("input %q has shape %s, the model expects %s", v.name, formatShape(t.Shape), formatShape(v.shape))
		case len(t.Data) != numElements(v.shape):
			return fmt.Errorf("input %q: shape %s needs %d elements, Data has %d", v.name, formatShape(t.Shape), numElements(v.shape), len(t.Data))
		}
	}
	if len(inputs) != len(m.inputs) {
		return fmt.Errorf("unknown inputs %s; the model's inputs are %s", m.unknownInputs(inputs), m.inputNames())
	}
	return nil
}

func (m *Model) unknownInputs(inputs map[string]*Tensor) string {
	known := map[string]bool{}
	for _, id := range m.inputs {
		known[m.values[id].name] = true
	}
	var unknown []string
	for name := range inputs {
		if !known[name] {
			unknown = append(unknown, fmt.Sprintf("%q", name))
		}
	}
	sort.Strings(unknown)
	return strings.Join(unknown, ", ")
}

func (m *Model) inputNames() string {
	names := make([]string, len(m.inputs))
	for i, id := range m.inputs {
		names[i] = fmt.Sprintf("%q", m.values[id].name)
	}
	return strings.Join(names, ", ")
}

// detach drops the session's references to the caller's inputs and to the
// outputs it returned.
func (s *Session) detach() {
	for _, id := range s.model.inputs {
		s.tensors[id].Data = nil
	}
	for _, id := range s.model.outputs {
		if s.fresh[id] {
			s.tensors[id].Data = nil
		}
	}
}

// checkNode refuses a node index TimeNode cannot time.
func (m *Model) checkNode(i int) error {
	if i < 0 || i >= len(m.nodes) {
		return fmt.Errorf("runtime: TimeNode: node %d does not exist (the model has %d)", i, len(m.nodes))
	}
	return nil
}

// TimeNode runs node i (an index of Model.Nodes) alone repeat times on
// random inputs of its shapes (constant inputs keep their values) and
// returns the median time of one run. One untimed run warms caches first.
func (s *Session) TimeNode(ctx context.Context, i int, repeat int) (time.Duration, error) {
	m := s.model
	if err := m.checkNode(i); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := m.nodes[i]
	in := m.nodeInputs(i)
	out := make([]*Tensor, len(n.out))
	for j, id := range n.out {
		if id >= 0 {
			out[j] = NewTensor(m.values[id].shape...)
		}
	}
	step := n.kernel.bind(in, out, s.env)
	d, err := timing.Repeat(ctx, repeat, timing.Wall(func() error { step(); return nil }))
	if err != nil {
		return 0, fmt.Errorf("runtime: TimeNode: %w", err)
	}
	return d, nil
}

// nodeInputs are the inputs TimeNode runs node i on: constant inputs keep
// their values, the others are uniform in [-1, 1), seeded by the node's
// index and the input's name, so that every timing of the node, in any
// runtime (see NodeModel), sees the same data.
func (m *Model) nodeInputs(i int) []*Tensor {
	n := m.nodes[i]
	in := make([]*Tensor, len(n.in))
	for j, id := range n.in {
		switch {
		case id < 0:
		case m.values[id].isConst():
			in[j] = m.values[id].konst
		default:
			in[j] = NewTensor(m.values[id].shape...)
			fillUniform(in[j].Data, streamSeed(uint64(i), m.values[id].name), 1)
		}
	}
	return in
}
