package ort

import (
	"context"
	"fmt"
	goruntime "runtime"
	"time"

	onnxruntime "github.com/yalue/onnxruntime_go"

	"rulebook/onnx"
	"rulebook/runtime"
	"rulebook/timing"
)

// Options say how to open a session.
type Options struct {
	// Library is the path of libonnxruntime.so (see Search).
	Library string
	// Threads is the number of intra-op threads; 0 means all cores, as
	// for the runtime's own sessions.
	Threads int
}

// Session runs a runtime.Model in ONNX Runtime. It is a runtime.Executor,
// so that run and bench-ops take either backend.
type Session struct {
	model   *runtime.Model
	threads int
	session *onnxruntime.DynamicAdvancedSession
	inputs  []string
	outputs []string
}

// Open loads the library if need be and opens a session on m's model,
// with the weights m holds embedded (see runtime.Model.ONNX).
func Open(m *runtime.Model, opt Options) (*Session, error) {
	if err := Load(opt.Library); err != nil {
		return nil, err
	}
	threads := opt.Threads
	if threads < 1 {
		threads = goruntime.GOMAXPROCS(0)
	}
	src, err := m.ONNX()
	if err != nil {
		return nil, fmt.Errorf("ort: %w", err)
	}
	s := &Session{model: m, threads: threads}
	for _, in := range m.Inputs() {
		s.inputs = append(s.inputs, in.Name)
	}
	for _, out := range m.Outputs() {
		s.outputs = append(s.outputs, out.Name)
	}
	if s.session, err = newSession(onnx.EncodeModel(src), s.inputs, s.outputs, threads); err != nil {
		return nil, fmt.Errorf("ort: opening the model: %w", err)
	}
	return s, nil
}

// newSession opens a session with threads intra-op threads, one inter-op
// thread and sequential execution: the runtime runs nodes one after
// another on its threads, and timings compare only under the same rules.
// Graph optimisations stay at ONNX Runtime's default (all), since they
// are part of what it is.
func newSession(model []byte, inputs, outputs []string, threads int) (*onnxruntime.DynamicAdvancedSession, error) {
	opts, err := onnxruntime.NewSessionOptions()
	if err != nil {
		return nil, err
	}
	defer opts.Destroy()
	for _, set := range []func() error{
		func() error { return opts.SetIntraOpNumThreads(threads) },
		func() error { return opts.SetInterOpNumThreads(1) },
		func() error { return opts.SetExecutionMode(onnxruntime.ExecutionModeSequential) },
	} {
		if err := set(); err != nil {
			return nil, err
		}
	}
	return onnxruntime.NewDynamicAdvancedSessionWithONNXData(model, inputs, outputs, opts)
}

// Run runs the model on inputs, by graph input name (float32, as the
// runtime takes them), and returns the outputs by name as float32.
func (s *Session) Run(ctx context.Context, inputs map[string]*runtime.Tensor) (map[string]*runtime.Tensor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ins := make([]onnxruntime.Value, len(s.inputs))
	defer destroyAll(ins)
	for i, name := range s.inputs {
		t, ok := inputs[name]
		if !ok {
			return nil, fmt.Errorf("ort: Run: input %q is missing", name)
		}
		v, err := toORT(t, onnx.Float)
		if err != nil {
			return nil, fmt.Errorf("ort: Run: input %q: %w", name, err)
		}
		ins[i] = v
	}
	outs := make([]onnxruntime.Value, len(s.outputs))
	defer destroyAll(outs)
	if err := s.session.Run(ins, outs); err != nil {
		return nil, fmt.Errorf("ort: Run: %w", err)
	}
	result := make(map[string]*runtime.Tensor, len(outs))
	for i, v := range outs {
		t, err := fromORT(v)
		if err != nil {
			return nil, fmt.Errorf("ort: Run: output %q: %w", s.outputs[i], err)
		}
		result[s.outputs[i]] = t
	}
	return result, nil
}

// TimeNode times node i of the model's Nodes alone: a model of that one
// node (runtime.Model.NodeModel: the same attributes, constant inputs and
// random inputs as the runtime's own TimeNode) in a session with this
// session's threads, repeat runs after a warm-up, the median. Outputs are
// allocated by the first run and reused, so a run is ONNX Runtime's call
// overhead and the kernel.
func (s *Session) TimeNode(ctx context.Context, i int, repeat int) (time.Duration, error) {
	model, feeds, err := s.model.NodeModel(i)
	if err != nil {
		return 0, err
	}
	g := model.Graph
	ins := make([]onnxruntime.Value, len(g.Inputs))
	defer destroyAll(ins)
	names := make([]string, len(g.Inputs))
	for k, vi := range g.Inputs {
		names[k] = vi.Name
		if ins[k], err = toORT(feeds[vi.Name], vi.ElemType); err != nil {
			return 0, fmt.Errorf("ort: TimeNode: input %q: %w", vi.Name, err)
		}
	}
	outNames := make([]string, len(g.Outputs))
	for k, vi := range g.Outputs {
		outNames[k] = vi.Name
	}
	session, err := newSession(onnx.EncodeModel(model), names, outNames, s.threads)
	if err != nil {
		return 0, fmt.Errorf("ort: TimeNode: opening node %d's model: %w", i, err)
	}
	defer session.Destroy()
	outs := make([]onnxruntime.Value, len(outNames))
	defer destroyAll(outs)
	run := func() error { return session.Run(ins, outs) }
	d, err := timing.Repeat(ctx, repeat, timing.Wall(run))
	if err != nil {
		return 0, fmt.Errorf("ort: TimeNode: %w", err)
	}
	return d, nil
}

// DeviceKey is "ort-cpu/N", N intra-op threads: ONNX Runtime's CPU
// execution provider, kept apart from the runtime's "cpu/N" in cost
// tables.
func (s *Session) DeviceKey() string { return DeviceKey(s.threads) }

// DeviceKey names ONNX Runtime on the CPU with threads threads (0: all
// cores) as cost tables key it.
func DeviceKey(threads int) string {
	if threads < 1 {
		threads = goruntime.GOMAXPROCS(0)
	}
	return fmt.Sprintf("ort-cpu/%d", threads)
}

// Close releases the session.
func (s *Session) Close() error {
	if s.session == nil {
		return nil
	}
	err := s.session.Destroy()
	s.session = nil
	return err
}

func destroyAll(vs []onnxruntime.Value) {
	for _, v := range vs {
		if v != nil {
			v.Destroy()
		}
	}
}
