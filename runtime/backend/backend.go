// Package backend opens models on the backends the model commands name. These
// are the runtime's own CPU and CUDA sessions and ONNX Runtime (runtime/ort).
// It also runs several of them side by side on one model. run and bench-ops
// share it, so the command line only parses flags and prints. Its errors
// therefore name the flags (--backend, --weights, --dim).
// docs/runtime.md ("Other backends") tells the rest.
package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"rulebook/runtime"
	"rulebook/runtime/cuda"
	"rulebook/runtime/ort"
)

// ORT names ONNX Runtime's CPU execution provider as a backend.
const ORT = runtime.BackendORT

// Options are what the model commands' flags say about loading and
// running a model.
type Options struct {
	// Threads is the CPU threads of a session (0: all cores).
	Threads int
	Load    runtime.LoadOptions
	// ORTLibrary is the ONNX Runtime library: a path from the command line,
	// or "" to search (ort.DefaultSearch). Check sets it to the library
	// found.
	ORTLibrary string
	// Precision of the cuda backend's products and convolutions
	// (--precision): fp32, tf32 or bf16; "" is fp32.
	Precision string
}

// Check splits a comma-separated list of backends and checks each cheaply,
// before a model is read: the name, a GPU for cuda, the library for ort,
// which it loads. It resolves o.ORTLibrary to the library's path.
func (o *Options) Check(ctx context.Context, list string) ([]string, error) {
	if o.Threads < 0 || o.Threads > MaxThreads {
		return nil, fmt.Errorf("--threads %d: expected 0 (all cores) to %d", o.Threads, MaxThreads)
	}
	names := strings.Split(list, ",")
	if err := o.checkPrecision(names); err != nil {
		return nil, err
	}
	for i, name := range names {
		names[i] = strings.TrimSpace(name)
		if slices.Contains(names[:i], names[i]) {
			return nil, fmt.Errorf("--backend %s is named twice in %q", names[i], list)
		}
		if err := o.check(ctx, names[i]); err != nil {
			return nil, err
		}
	}
	return names, nil
}

func (o *Options) check(ctx context.Context, name string) error {
	switch name {
	case runtime.BackendCPU, runtime.BackendCUDA:
		if err := runtime.CheckBackend(name); err != nil {
			return fmt.Errorf("--%w", err)
		}
		return nil
	case ORT:
		lib, err := ort.DefaultSearch(o.ORTLibrary).Find(ctx)
		if err == nil {
			err = ort.Load(lib)
		}
		if err != nil {
			return fmt.Errorf("--backend ort: %w", err)
		}
		o.ORTLibrary = lib
		return nil
	}
	return fmt.Errorf("--backend must be cpu, cuda or ort, or a comma-separated list of them, got %q", name)
}

// ParseWeights checks the --weights mode.
func ParseWeights(mode string) (runtime.WeightsMode, error) {
	switch m := runtime.WeightsMode(mode); m {
	case runtime.WeightsAuto, runtime.WeightsFile, runtime.WeightsRandom:
		return m, nil
	}
	return "", fmt.Errorf("--weights must be auto, file or random, got %q", mode)
}

// ParseDims reads the --dim values of symbolic input dimensions, NAME=N
// each.
func ParseDims(specs []string) (map[string]int, error) {
	dims := map[string]int{}
	for _, s := range specs {
		name, value, ok := strings.Cut(s, "=")
		n, err := strconv.Atoi(value)
		if !ok || name == "" || err != nil || n < 1 {
			return nil, fmt.Errorf("--dim %q: expected NAME=N with N ≥ 1", s)
		}
		dims[name] = n
	}
	return dims, nil
}

// MaxThreads bounds --threads: a thread pool far past any machine's cores
// only costs memory.
const MaxThreads = 1024

// ErrUnusedDim is matched (errors.Is) by the error for a --dim that names
// no symbolic dimension of the model.
var ErrUnusedDim = errors.New("the model has no input dimension of that name")

// DimsUsed refuses --dim values that name no symbolic input dimension of
// the model loaded from path: a value given for nothing is a typo.
func DimsUsed(path string, report *runtime.LoadReport) error {
	if len(report.UnusedDims) == 0 {
		return nil
	}
	return fmt.Errorf("--dim %s: %w in %s", strings.Join(report.UnusedDims, ", "), ErrUnusedDim, path)
}

// Load reads a model as the options say, and notes on w that weights were
// generated when they were.
func Load(w io.Writer, path string, o Options) (*runtime.Model, error) {
	m, report, err := runtime.Load(path, o.Load)
	if err != nil {
		return nil, err
	}
	if err := DimsUsed(path, report); err != nil {
		return nil, err
	}
	if n := len(report.RandomWeights); n > 0 {
		fmt.Fprintf(w, "note: %d initializers have no data here (weights file absent); using random weights, seed %d\n", n, o.Load.Seed)
	}
	return m, nil
}

// OpenAll opens an executor for m on each of names, in order; on an error
// it closes those it opened. The caller closes them (CloseAll).
func OpenAll(w io.Writer, m *runtime.Model, names []string, o Options) ([]runtime.Executor, error) {
	var execs []runtime.Executor
	for _, name := range names {
		e, err := Open(w, m, name, o)
		if err != nil {
			CloseAll(execs)
			return nil, err
		}
		execs = append(execs, e)
	}
	return execs, nil
}

// CloseAll closes executors, keeping the first error.
func CloseAll(execs []runtime.Executor) error {
	var first error
	for _, e := range execs {
		if err := e.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Open opens an executor for m on a backend Check accepted; notes (nodes
// the CUDA backend leaves to the CPU) go to w. The caller closes it.
func Open(w io.Writer, m *runtime.Model, name string, o Options) (runtime.Executor, error) {
	var e runtime.Executor
	var err error
	switch name {
	case ORT:
		e, err = ort.Open(m, ort.Options{Library: o.ORTLibrary, Threads: o.Threads})
	case runtime.BackendCUDA:
		var p cuda.Precision
		if p, err = o.precision(); err == nil {
			e, err = m.OpenCUDA(runtime.CUDAOptions{Precision: p})
		}
	default:
		e, err = m.Open(name, o.Threads)
	}
	if err != nil {
		return nil, fmt.Errorf("--backend %s: %w", name, err)
	}
	if gpu, ok := e.(*runtime.CUDASession); ok && len(gpu.Fallbacks()) > 0 {
		fmt.Fprintf(w, "note: %d nodes run on the CPU: %s\n", len(gpu.Fallbacks()), strings.Join(gpu.Fallbacks(), "; "))
	}
	if gpu, ok := e.(*runtime.CUDASession); ok {
		for _, n := range gpu.Notes() {
			fmt.Fprintf(w, "note: %s\n", n)
		}
	}
	return e, nil
}

// precision parses --precision ("" is fp32).
func (o *Options) precision() (cuda.Precision, error) {
	if o.Precision == "" {
		return cuda.FP32, nil
	}
	p, err := cuda.ParsePrecision(o.Precision)
	if err != nil {
		return p, fmt.Errorf("--%w", err)
	}
	return p, nil
}

// checkPrecision refuses a bad --precision, and one other than fp32
// where no backend listed is cuda: only the CUDA backend honours it.
func (o *Options) checkPrecision(names []string) error {
	p, err := o.precision()
	if err != nil {
		return err
	}
	if p != cuda.FP32 && !slices.ContainsFunc(names, func(n string) bool { return strings.TrimSpace(n) == runtime.BackendCUDA }) {
		return fmt.Errorf("--precision %s applies to --backend cuda only", p)
	}
	return nil
}
