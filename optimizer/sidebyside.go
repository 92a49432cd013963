package optimizer

import (
	"context"
	"fmt"
	"math"
	goruntime "runtime"
	"slices"

	"rulebook/onnx"
	"rulebook/runtime"
	"rulebook/timing"
)

// SideBySide is the measured comparison of a model and its rewrite on one
// backend: the same weights and inputs, runs interleaved so that both see
// the same machine conditions.
type SideBySide struct {
	Runs      int     `json:"runs"`
	Threads   int     `json:"threads"`
	Original  float64 `json:"original_ms"`  // median
	Optimized float64 `json:"optimized_ms"` // median
	Speedup   float64 `json:"speedup"`
	// MaxRelDiff is the largest output difference relative to the
	// output's largest magnitude.
	MaxRelDiff float64 `json:"max_relative_difference"`
	// Backend is what both ran on: "cpu" (our runtime) or "ort" (ONNX
	// Runtime).
	Backend string `json:"backend,omitempty"`
	// Spread is the larger of the two models' interquartile ranges of
	// time: medians closer than it differ by noise (see timing.Spread).
	Spread float64 `json:"spread_ms"`
}

// Opener opens an executor for a model on one backend.
type Opener func(m *runtime.Model) (runtime.Executor, error)

// CPUOpener opens CPU runtime sessions of threads threads (0: all cores).
func CPUOpener(threads int) Opener {
	return func(m *runtime.Model) (runtime.Executor, error) {
		return m.NewSession(runtime.SessionOptions{Threads: threads})
	}
}

// MeasureSideBySide runs the original model (as loaded, random weights
// included) and the rewritten one, whose weights are inline, on the same
// random inputs, runs times each after a warm-up run, alternating which
// goes first, on the executors open makes, and compares their outputs.
func MeasureSideBySide(ctx context.Context, orig *runtime.Model, rewritten *onnx.Model, runs, threads int, seed uint64, open Opener) (*SideBySide, error) {
	decoded, err := onnx.DecodeModel(onnx.EncodeModel(rewritten))
	if err != nil {
		return nil, err
	}
	opt, _, err := runtime.FromONNX(decoded, "", runtime.LoadOptions{Weights: runtime.WeightsFile})
	if err != nil {
		return nil, fmt.Errorf("load the rewritten model: %w", err)
	}
	feeds := orig.RandomInputs(seed)
	outs := make([]map[string]*runtime.Tensor, 2)
	contenders := make([]func() error, 2)
	for i, m := range []*runtime.Model{orig, opt} {
		e, err := open(m)
		if err != nil {
			return nil, err
		}
		defer e.Close()
		contenders[i] = func() (err error) {
			outs[i], err = e.Run(ctx, feeds)
			return err
		}
	}
	times, err := timing.SideBySideTimes(ctx, runs, contenders...)
	if err != nil {
		return nil, err
	}
	if threads < 1 {
		threads = goruntime.GOMAXPROCS(0)
	}
	res := &SideBySide{Runs: runs, Threads: threads, Original: timing.Milliseconds(timing.Median(times[0])), Optimized: timing.Milliseconds(timing.Median(times[1])),
		Spread: timing.Milliseconds(max(timing.Spread(times[0]), timing.Spread(times[1])))}
	res.Speedup = res.Original / res.Optimized
	for name, want := range outs[0] {
		got, ok := outs[1][name]
		if !ok || !slices.Equal(got.Shape, want.Shape) {
			return nil, fmt.Errorf("the rewritten model's output %q is missing or has another shape", name)
		}
		res.MaxRelDiff = math.Max(res.MaxRelDiff, relDiff(want.Data, got.Data))
	}
	return res, nil
}

// relDiff is the largest difference relative to want's largest magnitude,
// at most 1: a NaN where the other has a number, or any difference from an
// all-zero output, counts as completely different.
func relDiff(want, got []float32) float64 {
	scale, worst := 0.0, 0.0
	for i := range want {
		a, b := float64(want[i]), float64(got[i])
		if math.IsNaN(a) != math.IsNaN(b) {
			return 1
		}
		if math.IsNaN(a) || a == b { // equal infinities too
			continue
		}
		scale = math.Max(scale, math.Abs(a))
		worst = math.Max(worst, math.Abs(b-a))
	}
	if worst == 0 {
		return 0
	}
	if scale == 0 || math.IsInf(scale, 0) || math.IsInf(worst, 0) {
		return 1
	}
	return math.Min(worst/scale, 1)
}
