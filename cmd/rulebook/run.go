package main

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"rulebook/internal/progress"
	"rulebook/internal/safetext"
	"rulebook/optimizer"
	"rulebook/runtime"
	"rulebook/runtime/backend"
	"rulebook/store"
)

// modelOptions are the flags every command that loads a model shares.
type modelOptions struct {
	backend, weights, ortLib string
	precision                string
	seed                     uint64
	threads                  int
	dims                     []string
}

func (o *modelOptions) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.backend, "backend", "cpu", "cpu, cuda or ort (ONNX Runtime); run takes a list, cpu,ort, to time them side by side")
	f.StringVar(&o.precision, "precision", "fp32", "fp32, tf32 or bf16: how --backend cuda multiplies and convolves (tf32 and bf16 round the operands, accumulating in fp32)")
	f.StringVar(&o.ortLib, "ort-lib", "", "libonnxruntime.so for --backend ort (default: $ONNXRUNTIME_LIB, then python3's onnxruntime package, then the library directories)")
	f.StringVar(&o.weights, "weights", "auto", "auto (the model's weights file, else random), file, or random")
	f.Uint64Var(&o.seed, "seed", 1, "seed of generated weights and inputs")
	f.IntVar(&o.threads, "threads", 0, "CPU threads (default: all cores)")
	f.StringSliceVar(&o.dims, "dim", nil, "value of a symbolic input dimension, NAME=N (repeatable)")
}

// load reads a model and opens an executor on each backend named, in
// order; notes (generated weights) go to stderr. The caller closes them.
func (o *modelOptions) load(cmd *cobra.Command, path string) (*runtime.Model, []runtime.Executor, []string, error) {
	opt := backend.Options{Threads: o.threads, ORTLibrary: o.ortLib, Precision: o.precision, Load: runtime.LoadOptions{Seed: o.seed}}
	names, err := opt.Check(cmd.Context(), o.backend)
	if err == nil {
		opt.Load.Weights, err = backend.ParseWeights(o.weights)
	}
	if err == nil {
		opt.Load.Dims, err = backend.ParseDims(o.dims)
	}
	if err == nil {
		opt.Load.Memory, err = memoryBudget(cmd)
	}
	var m *runtime.Model
	if err == nil {
		m, err = backend.Load(cmd.ErrOrStderr(), path, opt)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	execs, err := backend.OpenAll(cmd.ErrOrStderr(), m, names, opt)
	return m, execs, names, err
}

func newRunCmd() *cobra.Command {
	var (
		o              modelOptions
		inputs, expect []string
		tol            runtime.Tolerance
		repeat         int
	)
	cmd := &cobra.Command{
		Use:   "run MODEL.onnx",
		Short: "Run an ONNX model and print its outputs and median latency",
		Long:  help("run") + strings.Join(runtime.Ops(), ", ") + `.`,
		Example: `  rulebook run ../shared/models/resnet50.onnx --repeat 10
  rulebook run ../shared/models/squeezenet1_1-full.onnx --input ../shared/models/squeezenet1_1-full_test_data_set_0/input_0.pb
  rulebook run ../shared/models/squeezenet1_1-full.onnx --input ../shared/models/squeezenet1_1-full_test_data_set_0/input_0.pb --expect ../shared/models/squeezenet1_1-full_test_data_set_0/output_0.pb
  rulebook run ../shared/models/squeezenet1_1.onnx --backend cpu,ort --repeat 20 --threads 2`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if repeat < 1 {
				return fmt.Errorf("--repeat must be at least 1, got %d", repeat)
			}
			if !(tol.RTol >= 0 && tol.ATol >= 0) || math.IsInf(tol.RTol+tol.ATol, 0) {
				return fmt.Errorf("--rtol and --atol must be finite and not negative, got %g and %g", tol.RTol, tol.ATol)
			}
			m, execs, names, err := o.load(cmd, args[0])
			if err != nil {
				return err
			}
			defer backend.CloseAll(execs)
			if n := len(m.Inputs()); len(inputs) > 0 && len(inputs) != n {
				return fmt.Errorf("--input: the model has %d inputs, got %d files", n, len(inputs))
			}
			var refs []*runtime.Tensor
			if len(expect) > 0 {
				if refs, err = m.ReadReferences(expect); err != nil {
					return fmt.Errorf("--expect: %w", err)
				}
			}
			feeds := m.RandomInputs(o.seed)
			if len(inputs) > 0 {
				if feeds, err = m.ReadInputs(inputs); err != nil {
					return err
				}
			}
			results, err := backend.SideBySide(cmd.Context(), execs, feeds, repeat)
			if err != nil {
				return err
			}
			if len(execs) > 1 {
				err = backend.WriteSideBySide(cmd.OutOrStdout(), m, names, results, repeat)
			} else {
				m.WriteOutputSummary(cmd.OutOrStdout(), results[0].Outputs)
				fmt.Fprintf(cmd.OutOrStdout(), "median latency %s over %d runs (%s backend, %s)\n",
					results[0].Median.Round(time.Microsecond), repeat, names[0], safetext.Name(filepath.Base(args[0])))
			}
			for i := 0; err == nil && len(expect) > 0 && i < len(results); i++ {
				if err = m.CheckOutputs(results[i].Outputs, refs, tol); err != nil {
					return fmt.Errorf("--expect (%s backend): %w", names[i], err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s outputs match their references (rtol %g, atol %g); relative error %.2g\n", names[i], tol.RTol, tol.ATol, m.RelativeError(results[i].Outputs, refs))
			}
			return err
		},
	}
	o.register(cmd)
	f := cmd.Flags()
	f.StringSliceVar(&inputs, "input", nil, "input tensor file (.pb), one per model input in order (default: random)")
	f.StringSliceVar(&expect, "expect", nil, "reference output file (.pb), one per model output in order: fail if an output differs (repeatable)")
	f.Float64Var(&tol.RTol, "rtol", runtime.DefaultRTol, "relative tolerance of --expect")
	f.Float64Var(&tol.ATol, "atol", runtime.DefaultATol, "absolute tolerance of --expect")
	f.IntVar(&repeat, "repeat", 5, "timed runs after one warm-up run")
	return cmd
}

func newBenchOpsCmd() *cobra.Command {
	var (
		o      modelOptions
		repeat int
	)
	cmd := &cobra.Command{
		Use:     "bench-ops MODEL.onnx",
		Short:   "Time each distinct operator configuration of a model and store the costs",
		Long:    help("bench-ops"),
		Example: "  rulebook bench-ops ../shared/models/resnet50.onnx --repeat 10",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if repeat < 1 {
				return fmt.Errorf("--repeat must be at least 1, got %d", repeat)
			}
			m, execs, _, err := o.load(cmd, args[0])
			if err != nil {
				return err
			}
			defer backend.CloseAll(execs)
			db, err := store.Open(cmd.Context(), dbPath(cmd))
			if err != nil {
				return err
			}
			defer db.Close()
			for i := 0; err == nil && i < len(execs); i++ {
				err = benchOps(cmd, db, m, execs[i], args[0], o, repeat)
			}
			return err
		},
	}
	o.register(cmd)
	cmd.Flags().IntVar(&repeat, "repeat", 10, "timed runs per configuration")
	return cmd
}

func benchOps(cmd *cobra.Command, db *store.Store, m *runtime.Model, s runtime.Executor, path string, o modelOptions, repeat int) error {
	bar := progress.New(cmd.ErrOrStderr(), false)
	runID, costs, err := optimizer.BenchOps(cmd.Context(), db, m, s, path, repeat, o.seed, toolVersion, bar.Stage("bench-ops"))
	bar.Finish()
	if err != nil {
		return err
	}
	optimizer.WriteCostTotals(cmd.OutOrStdout(), m.Nodes(), costs)
	fmt.Fprintf(cmd.OutOrStdout(), "stored %d operator configurations for %s (run %d)\n", len(costs), s.DeviceKey(), runID)
	return nil
}
