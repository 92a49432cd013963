package runtime

import (
	"cmp"
	"context"
	"fmt"
	goruntime "runtime"
	"slices"
	"time"

	"rulebook/internal/progress"
	"rulebook/runtime/cuda"
)

// Executor runs a loaded model: a CPU Session, a CUDASession, or ONNX
// Runtime's session (package runtime/ort).
type Executor interface {
	Run(ctx context.Context, inputs map[string]*Tensor) (map[string]*Tensor, error)
	// TimeNode times node i of Model.Nodes alone (see Session.TimeNode).
	TimeNode(ctx context.Context, i int, repeat int) (time.Duration, error)
	// DeviceKey names the device as cost tables key it (see CPUDevice).
	DeviceKey() string
	// Close releases what the executor holds on its device.
	Close() error
}

// The backends a model runs on.
const (
	BackendCPU  = "cpu"
	BackendCUDA = "cuda"
	// BackendORT is ONNX Runtime's CPU provider, opened by package
	// runtime/ort (through runtime/backend), not by Model.Open.
	BackendORT = "ort"
)

// CheckBackend refuses an unknown backend, and the CUDA backend where
// there is no GPU, cheaply, before a model is read.
func CheckBackend(name string) error {
	switch name {
	case BackendCPU:
		return nil
	case BackendCUDA:
		if _, err := cuda.Probe(); err != nil {
			return fmt.Errorf("backend cuda: %w", err)
		}
		return nil
	}
	return fmt.Errorf("backend must be cpu or cuda, got %q", name)
}

// Open opens an executor for m on backend: a Session with threads CPU
// threads (0: all cores), or a CUDASession. The caller closes it.
func (m *Model) Open(backend string, threads int) (Executor, error) {
	switch backend {
	case BackendCPU:
		return m.NewSession(SessionOptions{Threads: threads})
	case BackendCUDA:
		return m.NewCUDASession()
	}
	return nil, CheckBackend(backend)
}

// Close does nothing: a session holds only memory, and its helper
// goroutines end when it is collected.
func (s *Session) Close() error { return nil }

// CPUDevice names the CPU backend with threads threads (0: all cores) as
// cost tables key it, "cpu/2": timings differ with the thread count.
func CPUDevice(threads int) string {
	if threads < 1 {
		threads = goruntime.GOMAXPROCS(0)
	}
	return fmt.Sprintf("cpu/%d", threads)
}

// CUDADevice names the GPU a CUDA session would run on as cost tables key
// it, "cuda/NAME" (see CUDASession.DeviceKey), without opening a session;
// where there is none, the error is CheckBackend's.
func CUDADevice() (string, error) {
	d, err := cuda.Probe()
	if err != nil {
		return "", fmt.Errorf("backend cuda: %w", err)
	}
	return "cuda/" + d.Name, nil
}

// DeviceKey is "cpu/N" for a session with N threads.
func (s *Session) DeviceKey() string { return CPUDevice(s.workers.threads) }

// DeviceKey is "cuda/NAME": timings differ from one GPU to another.
func (s *CUDASession) DeviceKey() string { return "cuda/" + s.Device().Name }

// ConfigKey identifies a node's configuration as cost tables do: the
// operator, its shapes and the parameters that affect its cost.
func (n NodeInfo) ConfigKey() string { return n.Op + "|" + n.ShapeKey() + "|" + n.Params }

// DistinctConfigs keeps the first node of each configuration.
func DistinctConfigs(nodes []NodeInfo) []NodeInfo {
	seen := map[string]bool{}
	var out []NodeInfo
	for _, n := range nodes {
		if key := n.ConfigKey(); !seen[key] {
			seen[key] = true
			out = append(out, n)
		}
	}
	return out
}

// TimeConfigs times each of nodes alone on e, the median of repeat runs,
// and tells report after each, as stage "bench-ops".
func TimeConfigs(ctx context.Context, e Executor, nodes []NodeInfo, repeat int, report progress.Func) ([]time.Duration, error) {
	times := make([]time.Duration, len(nodes))
	for i, n := range nodes {
		d, err := e.TimeNode(ctx, n.Index, repeat)
		if err != nil {
			return nil, fmt.Errorf("node %d (%s %s): %w", n.Index, n.Op, n.Name, err)
		}
		times[i] = d
		report.Report(progress.Step{Stage: "bench-ops", Done: int64(i + 1), Total: int64(len(nodes))})
	}
	return times, nil
}

// OperatorTotal is the time one operator takes over a whole model.
type OperatorTotal struct {
	Op    string
	Nodes int
	Sum   time.Duration
}

// TotalsByOperator adds up each node's cost by operator, the largest
// total first, and returns the model's total too.
func TotalsByOperator(nodes []NodeInfo, cost func(NodeInfo) time.Duration) ([]OperatorTotal, time.Duration) {
	var totals []OperatorTotal
	var all time.Duration
	for _, n := range nodes {
		i := slices.IndexFunc(totals, func(t OperatorTotal) bool { return t.Op == n.Op })
		if i < 0 {
			i = len(totals)
			totals = append(totals, OperatorTotal{Op: n.Op})
		}
		d := cost(n)
		totals[i].Nodes++
		totals[i].Sum += d
		all += d
	}
	slices.SortStableFunc(totals, func(a, b OperatorTotal) int { return cmp.Compare(b.Sum, a.Sum) })
	return totals, all
}
