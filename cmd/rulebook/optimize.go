package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/spf13/cobra"

	"rulebook/internal/outfile"
	"rulebook/internal/progress"
	"rulebook/optimizer"
	"rulebook/runtime"
	"rulebook/runtime/backend"
	"rulebook/version"
)

type optimizeOptions struct {
	rules, output, report string
	opt                   optimizer.Options
	weights               string
	weightsMode           runtime.WeightsMode // weights parsed
	seed                  uint64
	cost                  string
	device                string // --device: cpu or cuda
	costDevice            string // the device costs are for, as cost tables key it (check sets it)
	memoryMiB             int64
	threads, compare      int
	tolerance             float64
	noProgress            bool
	dims                  []string
	dimValues             map[string]int // dims parsed
	compareOn             string
	backends              backend.Options // --compare-on's, checked
	compareNames          []string        // --compare-on parsed
}

func newOptimizeCmd() *cobra.Command {
	o := optimizeOptions{opt: optimizer.DefaultOptions()}
	cmd := &cobra.Command{
		Use:   "optimize MODEL.onnx --rules TAG|HASH|BUNDLE.json",
		Short: "Rewrite an ONNX model with one pinned rule version (cost-based search)",
		Long:  help("optimize"),
		Example: `  rulebook optimize ../shared/models/squeezenet1_1.onnx --rules optimizer/testdata/rules-3ops.json
  rulebook optimize ../shared/models/resnet50.onnx --rules optimizer/testdata/rules-3ops.json --timeout 10s -o resnet50.opt.onnx
  rulebook optimize ../shared/models/bert_base.onnx --rules optimizer/testdata/rules-3ops.json --cost measured --budget 20 --compare 5
  rulebook optimize ../shared/models/resnet50.onnx --rules optimizer/testdata/rules-3ops.json --device cuda`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runOptimize(cmd, args[0], o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.rules, "rules", "", "rule version: a tag or hash prefix in the database, or an exported bundle (.json)")
	f.StringVarP(&o.output, "output", "o", "", "rewritten model (default MODEL.opt.onnx in the current directory)")
	f.StringVar(&o.report, "report", "", "JSON report (default the output's name with .json)")
	f.Float64Var(&o.opt.Alpha, "alpha", o.opt.Alpha, "keep graphs up to alpha times the best cost")
	f.IntVar(&o.opt.Budget, "budget", o.opt.Budget, "most graphs to expand")
	f.DurationVar(&o.opt.Timeout, "timeout", o.opt.Timeout, "wall-clock limit of the search (a measured gain's confirmation and --compare come after it)")
	f.StringVar(&o.cost, "cost", "analytic", "cost model: analytic or measured")
	f.StringVar(&o.device, "device", runtime.BackendCPU,
		"device the search prices graphs for: cpu (the CPU runtime) or cuda (a GPU: analytic costs model an H200, measured ones are timed on the CUDA backend)")
	f.Float64Var(&o.opt.MinGain, "min-gain", 0, "smallest improvement that counts, a fraction of the cost (default 0 for analytic costs, 0.005 for measured ones, which are noisy)")
	f.Int64Var(&o.memoryMiB, "memory-limit", 0, "most estimated peak memory of a rewritten model, in MiB (0: no limit)")
	f.IntVar(&o.opt.ConfirmRounds, "confirm", o.opt.ConfirmRounds,
		"with measured costs, rounds that time the search's changes against the original side by side before they are kept (0: keep them untimed)")
	f.IntVar(&o.compare, "compare", 0, "time the original and the rewritten model this many runs each (0: do not)")
	f.Float64Var(&o.tolerance, "tolerance", optimizer.DefaultTolerance, "with --compare, the largest output difference (relative to the output's largest magnitude) a rewrite may show and still be written")
	f.StringVar(&o.compareOn, "compare-on", "cpu", "backends --compare runs on: cpu (our runtime), cuda (our runtime on the GPU), ort (ONNX Runtime), or a list, cpu,ort")
	f.IntVar(&o.threads, "threads", 0, "CPU threads for measured costs and --compare (default: all cores)")
	f.StringVar(&o.weights, "weights", "auto", "auto, file or random (see rulebook run)")
	f.Uint64Var(&o.seed, "seed", 1, "seed of generated weights and of --compare's input")
	f.StringSliceVar(&o.dims, "dim", nil, "value of a symbolic input dimension, NAME=N (repeatable); the rewritten model is for these values")
	f.BoolVar(&o.noProgress, "no-progress", false, "do not draw the search's progress bar")
	return cmd
}

func (o *optimizeOptions) check() error {
	switch {
	case o.rules == "":
		return fmt.Errorf("--rules is required: a released version (see 'rulebook versions') or an exported bundle")
	case o.cost != "analytic" && o.cost != "measured":
		return fmt.Errorf("--cost must be analytic or measured, got %q", o.cost)
	case o.device != runtime.BackendCPU && o.device != runtime.BackendCUDA:
		return fmt.Errorf("--device must be cpu or cuda, got %q", o.device)
	case !(o.opt.Alpha >= 1) || math.IsInf(o.opt.Alpha, 0):
		return fmt.Errorf("--alpha must be at least 1 (1 keeps only improvements), got %g", o.opt.Alpha)
	case o.opt.Budget < 1 || o.opt.Timeout <= 0:
		return fmt.Errorf("--budget must be at least 1 and --timeout positive, got %d and %s", o.opt.Budget, o.opt.Timeout)
	case !(o.opt.MinGain >= 0 && o.opt.MinGain < 1):
		return fmt.Errorf("--min-gain must be a fraction in [0, 1), got %g", o.opt.MinGain)
	case o.memoryMiB < 0 || o.memoryMiB > math.MaxInt64>>20 || o.compare < 0 || o.threads < 0 || o.opt.ConfirmRounds < 0:
		return fmt.Errorf("--memory-limit (at most %d MiB), --compare, --confirm and --threads must not be negative", int64(math.MaxInt64>>20))
	case !(o.tolerance > 0 && o.tolerance <= 1):
		return fmt.Errorf("--tolerance must be a fraction in (0, 1], got %g", o.tolerance)
	}
	var err error
	if o.costDevice, err = optimizer.CostDevice(o.device, o.cost, o.threads); err != nil {
		return fmt.Errorf("--device %s --cost %s: %w", o.device, o.cost, err)
	}
	if o.weightsMode, err = backend.ParseWeights(o.weights); err != nil {
		return err
	}
	o.dimValues, err = backend.ParseDims(o.dims)
	return err
}

func runOptimize(cmd *cobra.Command, path string, o optimizeOptions) error {
	if err := o.check(); err != nil {
		return err
	}
	var err error
	if o.output, o.report, err = optimizer.OutputPaths(path, o.output, o.report); err != nil {
		return err
	}
	if err := outfile.Distinct(optimizeInputs(cmd, path, o.rules), []outfile.Named{{Path: o.output, Role: "-o"}, {Path: o.report, Role: "--report"}}); err != nil {
		return err
	}
	o.backends.Threads = o.threads
	if o.compareNames, err = o.backends.Check(cmd.Context(), o.compareOn); err != nil {
		return fmt.Errorf("--compare-on: %w", err)
	}
	rs, err := optimizer.LoadRules(cmd.Context(), dbPath(cmd), o.rules)
	if err != nil {
		return err
	}
	mem, err := memoryBudget(cmd)
	if err != nil {
		return err
	}
	rt, g, loaded, err := optimizer.LoadModel(path, runtime.LoadOptions{Weights: o.weightsMode, Seed: o.seed, Dims: o.dimValues, Memory: mem})
	if missing := (*runtime.MissingDimsError)(nil); errors.As(err, &missing) {
		err = fmt.Errorf("%w; give each with --dim NAME=N", err)
	}
	if err != nil {
		return err
	}
	if err := backend.DimsUsed(path, loaded); err != nil {
		return err
	}
	if n := len(loaded.RandomWeights); n > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: %d initializers have no data here (weights file absent); using random weights, seed %d\n", n, o.seed)
	}
	rec, err := openRecording(cmd, path, o)
	if err != nil {
		return err
	}
	defer rec.Close()
	rep, warnings, err := optimizeAndWrite(cmd, path, o, rs, rt, g, rec)
	// An interrupted optimization wrote the best graph so far: it is
	// recorded and summed up, and the error says so.
	if err = rec.Finish(cmd.Context(), rep, err); rep == nil {
		return err
	}
	for _, msg := range append(rec.Costs.Warnings(), warnings...) {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", msg)
	}
	printOptimization(cmd.OutOrStdout(), rep, o.output, rec)
	for _, msg := range rep.WeightNotes(o.output) {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: %s\n", msg)
	}
	return err
}

// optimizeInputs are the files optimize reads, which no output may be:
// the model, the bundle or the database the rules come from, and the
// database it records in.
func optimizeInputs(cmd *cobra.Command, model, rules string) []outfile.Named {
	in := append([]outfile.Named{{Path: model, Role: "the model"}}, outfile.Database(dbPath(cmd))...)
	if version.IsBundle(rules) {
		in = append(in, outfile.Named{Path: rules, Role: "the rule bundle"})
	}
	return in
}

// openRecording opens the database when the rules come from it, --db
// names one, or the default one exists; without one nothing is recorded
// and measured costs last for this run only.
func openRecording(cmd *cobra.Command, model string, o optimizeOptions) (*optimizer.Recording, error) {
	device := o.costDevice
	optional := version.IsBundle(o.rules) && !cmd.Flag("db").Changed && os.Getenv("RULEBOOK_DB") == ""
	settings := map[string]any{"model": model, "rules": o.rules, "cost": o.cost, "alpha": o.opt.Alpha,
		"budget": o.opt.Budget, "timeout": o.opt.Timeout.String(), "memory_limit_mib": o.memoryMiB, "device": device}
	return optimizer.OpenRecording(cmd.Context(), dbPath(cmd), optional, device, settings, o.seed, toolVersion)
}

// optimizeAndWrite searches with the chosen cost model, drawing the best
// cost as it improves, writes the rewritten model and the report, and
// returns the report with what the user should be warned of.
func optimizeAndWrite(cmd *cobra.Command, path string, o optimizeOptions, rs *version.Set, rt *runtime.Model, g *optimizer.Graph, rec *optimizer.Recording) (*optimizer.Report, []string, error) {
	opt := o.opt
	opt.MemoryLimit = o.memoryMiB << 20
	var measured *optimizer.Measured
	switch {
	case o.cost == "measured":
		measured = rec.Costs.Measured(cmd.Context(), o.device, o.threads)
		opt.Cost = measured
		if !cmd.Flags().Changed("min-gain") {
			opt.MinGain = 0.005
		}
	case o.device == runtime.BackendCUDA:
		opt.Cost = optimizer.H200()
	}
	bar := progress.New(cmd.ErrOrStderr(), o.noProgress)
	// The bar fills with whichever bound, --budget or --timeout, ends the
	// search first; the phases after it name themselves.
	opt.Progress = func(p optimizer.Progress) { bar.Status(p.Describe(opt, o.cost), int64(1000*p.Fraction), 1000) }
	opt.Phase = func(phase string) {
		if phase == optimizer.PhaseSearch {
			bar.Line(phase + "…") // the bar draws the search's progress
			return
		}
		bar.Phase(phase + "…")
	}
	job := optimizer.Job{Path: path, Runtime: rt, Graph: g, Rules: rs, Options: opt, CostModel: o.cost, Device: rec.Device,
		Output: o.output, Report: o.report, Compare: o.compare, Threads: o.threads, Seed: o.seed, Tolerance: o.tolerance, Backends: o.compareNames,
		Open: func(m *runtime.Model, name string) (runtime.Executor, error) {
			return backend.Open(cmd.ErrOrStderr(), m, name, o.backends)
		}}
	rep, err := job.Run(cmd.Context())
	bar.Finish()
	if sbs := (*optimizer.SideBySideError)(nil); errors.As(err, &sbs) {
		err = fmt.Errorf("--compare: %w", sbs.Err)
	}
	var warnings []string
	if measured != nil {
		if cerr := measured.Close(); cerr != nil {
			warnings = append(warnings, fmt.Sprintf("closing the GPU the costs were timed on: %v", cerr))
		}
	}
	if measured != nil && measured.Err() != nil && cmd.Context().Err() == nil {
		warnings = append(warnings, fmt.Sprintf("some nodes could not be timed and were priced analytically: %v", measured.Err()))
	}
	return rep, warnings, err
}

func printOptimization(w io.Writer, r *optimizer.Report, output string, rec *optimizer.Recording) {
	r.WriteText(w)
	if rec.Recorded() {
		fmt.Fprintf(w, "recorded as run %d", rec.RunID)
		if n := rec.Costs.Timed(); n > 0 {
			fmt.Fprintf(w, ", with %d operator costs measured", n)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "wrote %s\n", output)
}
