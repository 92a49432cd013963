package optimizer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"rulebook/internal/outfile"
	"rulebook/onnx"
	"rulebook/runtime"
	"rulebook/version"
)

// Job is one optimization of a model file, as 'rulebook optimize' runs
// it: the search, the rewritten model and its report written out, and,
// if asked, both models timed side by side.
type Job struct {
	Path    string         // the model file, as the report names it
	Runtime *runtime.Model // the model as the runtime loaded it (LoadModel)
	Graph   *Graph         // the model mapped onto the registry (LoadModel)
	Rules   *version.Set
	Options Options
	// CostModel and Device are how the report names Options.Cost
	// ("analytic" or "measured") and the device its costs are for
	// (CostDevice: "cpu/2", "cuda/NVIDIA H200").
	CostModel, Device string
	// Output and Report are the files the rewritten model and the JSON
	// report go to.
	Output, Report string
	// Compare, when positive, times both models that many runs each after
	// the search, with Threads CPU threads, on inputs drawn from Seed (see
	// MeasureSideBySide), on each of Backends with the executors Open
	// makes; with no Backends, on the CPU runtime.
	Compare, Threads int
	Seed             uint64
	// Tolerance is the largest relative output difference (see
	// SideBySide.MaxRelDiff) a compared rewrite may show and still be
	// written; 0 means DefaultTolerance.
	Tolerance float64
	Backends  []string
	Open      func(m *runtime.Model, backend string) (runtime.Executor, error)
}

// DefaultTolerance is the relative output difference above which a
// compared rewrite is not written: float32 rewrites that reassociate sums
// differ by about 1e-6 of the output's magnitude, a false rule by far more.
const DefaultTolerance = 1e-3

// ErrOutputsDiffer is what Run returns, wrapped, when the side-by-side
// run shows the rewritten model's outputs differ from the original's
// beyond the tolerance; nothing is written then.
var ErrOutputsDiffer = errors.New("the rewritten model's outputs differ from the original's")

// SideBySideError is a failure to time the rewritten model against the
// original.
type SideBySideError struct{ Err error }

func (e *SideBySideError) Error() string { return "side by side: " + e.Err.Error() }
func (e *SideBySideError) Unwrap() error { return e.Err }

// InterruptedError is how a Job ends whose context was cancelled: it
// still wrote the best graph found so far and its report, and says in
// which phase it was stopped. It unwraps to the context's error.
type InterruptedError struct {
	Phase          string // PhaseSearch, PhaseConfirmation, …
	Output, Report string
	Err            error
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("interrupted during the %s: wrote the best graph found so far to %s and its report to %s", e.Phase, e.Output, e.Report)
}
func (e *InterruptedError) Unwrap() error { return e.Err }

// Run searches, times both models if asked (a failure there is a
// *SideBySideError), writes the rewritten model and the report, and
// returns the report. When ctx is cancelled, each phase stops at once and
// Run writes what it has, the best graph found so far (for a measured
// search, the start graph unless its gain was confirmed), without the
// side-by-side times, and returns the report with an *InterruptedError.
func (j *Job) Run(ctx context.Context) (*Report, error) {
	res, err := Optimize(ctx, j.Graph, j.Rules, j.Options)
	if err != nil {
		return nil, err
	}
	interrupted := ""
	switch {
	case res.Stopped == Interrupted:
		interrupted = PhaseSearch
	case ctx.Err() != nil:
		interrupted = PhaseConfirmation
	}
	var measured []*SideBySide
	if j.Compare > 0 && interrupted == "" {
		announce(j.Options.Phase, PhaseComparison)
		measured, err = j.compare(ctx, res)
		switch {
		case ctx.Err() != nil:
			measured, interrupted = nil, PhaseComparison
		case err != nil:
			return nil, &SideBySideError{err}
		}
		if err := j.checkOutputs(measured); err != nil {
			return nil, err
		}
	}
	announce(j.Options.Phase, PhaseWriting)
	rep, err := j.write(res, measured)
	if err != nil {
		return nil, err
	}
	if interrupted == "" && ctx.Err() != nil {
		interrupted = PhaseWriting
	}
	if interrupted != "" {
		return rep, &InterruptedError{Phase: interrupted, Output: j.Output, Report: j.Report, Err: ctx.Err()}
	}
	return rep, nil
}

// compare times the rewritten model against the original on each backend.
func (j *Job) compare(ctx context.Context, res *Result) ([]*SideBySide, error) {
	out, err := res.Graph.ToONNX()
	if err != nil {
		return nil, err
	}
	backends, open := j.Backends, j.Open
	if len(backends) == 0 || open == nil {
		backends = []string{runtime.BackendCPU}
		open = func(m *runtime.Model, _ string) (runtime.Executor, error) { return CPUOpener(j.Threads)(m) }
	}
	var all []*SideBySide
	for _, b := range backends {
		m, err := MeasureSideBySide(ctx, j.Runtime, out, j.Compare, j.Threads, j.Seed, func(m *runtime.Model) (runtime.Executor, error) { return open(m, b) })
		if err != nil {
			return nil, fmt.Errorf("on %s: %w", b, err)
		}
		m.Backend = b
		all = append(all, m)
	}
	return all, nil
}

// checkOutputs refuses a rewrite whose outputs differ beyond the
// tolerance on any backend: a rule that is not sound, written out, would
// silently change what the model computes.
func (j *Job) checkOutputs(measured []*SideBySide) error {
	tol := cmp.Or(j.Tolerance, DefaultTolerance)
	for _, m := range measured {
		if !(m.MaxRelDiff <= tol) {
			return fmt.Errorf("on %s, outputs differ by %.2g at most (relative), above the tolerance %.2g; wrote neither %s nor %s: %w",
				backendName(m.Backend), m.MaxRelDiff, tol, j.Output, j.Report, ErrOutputsDiffer)
		}
	}
	return nil
}

// write writes the rewritten model, referring to the input's external
// weights where it can, and the report, which it returns.
func (j *Job) write(res *Result, measured []*SideBySide) (*Report, error) {
	file, err := res.Graph.ToONNXKeepingExternal()
	if err != nil {
		return nil, err
	}
	if err := onnx.WriteModel(j.Output, file); err != nil {
		return nil, err
	}
	rep := NewReport(j.Path, j.CostModel, j.Rules, j.Graph, res, measured)
	rep.Device = j.Device
	rep.ExternalData = externalData(file, j.Path, j.Output)
	return rep, rep.WriteFile(j.Report)
}

// OutputPaths settles the rewritten model's and the report's paths for
// the model file at model, given the ones asked for ("" for the default),
// and checks that both can be written before the search spends its
// minute. By default both go to the current directory, never beside the
// input, whose folder may be shared or read-only: MODEL.opt.onnx and the
// output's name with .json.
func OutputPaths(model, output, report string) (string, string, error) {
	if output == "" {
		base := filepath.Base(model)
		output = strings.TrimSuffix(base, filepath.Ext(base)) + ".opt.onnx"
	}
	if report == "" {
		report = strings.TrimSuffix(output, filepath.Ext(output)) + ".json"
	}
	if filepath.Clean(report) == filepath.Clean(output) {
		return "", "", fmt.Errorf("the report would overwrite the model %s: name the report with --report", output)
	}
	for _, p := range []string{output, report} {
		if err := outfile.Check(p); err != nil {
			return "", "", err
		}
		f, err := os.CreateTemp(filepath.Dir(p), ".rulebook-check-*")
		if err != nil {
			return "", "", fmt.Errorf("cannot write %s: %w", p, err)
		}
		f.Close()
		os.Remove(f.Name())
	}
	return output, report, nil
}

// externalData lists the weights files the written model refers to, and
// whether each lies beside it and beside the input model.
func externalData(m *onnx.Model, input, output string) []ExternalData {
	locs := m.Graph.ExternalLocations()
	out := []ExternalData{}
	for _, loc := range slices.Sorted(maps.Keys(locs)) {
		out = append(out, ExternalData{Location: loc, Initializers: locs[loc],
			BesideOutput: isFile(filepath.Join(filepath.Dir(output), loc)), BesideInput: isFile(filepath.Join(filepath.Dir(input), loc))})
	}
	return out
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
