package main

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"rulebook/internal/progress"
	"rulebook/optimizer"
	"rulebook/runtime"
	"rulebook/store"
	"rulebook/timing"
)

// modelOptions are the flags every command that loads a model shares.
type modelOptions struct {
	backend, weights string
	seed             uint64
	threads          int
	dims             []string
}

func (o *modelOptions) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.backend, "backend", "cpu", "cpu or cuda")
	f.StringVar(&o.weights, "weights", "auto", "auto (the model's weights file, else random), file, or random")
	f.Uint64Var(&o.seed, "seed", 1, "seed of generated weights and inputs")
	f.IntVar(&o.threads, "threads", 0, "CPU threads (default: all cores)")
	f.StringSliceVar(&o.dims, "dim", nil, "value of a symbolic input dimension, NAME=N (repeatable)")
}

// load reads a model and opens an executor on the chosen backend;
// warnings (generated weights) go to w. The caller closes the executor.
func (o *modelOptions) load(w io.Writer, path string) (*runtime.Model, runtime.Executor, error) {
	if err := runtime.CheckBackend(o.backend); err != nil {
		return nil, nil, fmt.Errorf("--%w", err)
	}
	mode := runtime.WeightsMode(o.weights)
	if mode != "auto" && mode != "file" && mode != "random" {
		return nil, nil, fmt.Errorf("--weights must be auto, file or random, got %q", o.weights)
	}
	dims, err := parseDims(o.dims)
	if err != nil {
		return nil, nil, err
	}
	m, report, err := runtime.Load(path, runtime.LoadOptions{Weights: mode, Seed: o.seed, Dims: dims})
	if err != nil {
		return nil, nil, err
	}
	if n := len(report.RandomWeights); n > 0 {
		fmt.Fprintf(w, "note: %d initializers have no data here (weights file absent); using random weights, seed %d\n", n, o.seed)
	}
	s, err := m.Open(o.backend, o.threads)
	if err != nil && o.backend == runtime.BackendCUDA {
		err = fmt.Errorf("--backend cuda: %w", err)
	}
	if err != nil {
		return nil, nil, err
	}
	if gpu, ok := s.(*runtime.CUDASession); ok && len(gpu.Fallbacks()) > 0 {
		fmt.Fprintf(w, "note: %d nodes run on the CPU: %s\n", len(gpu.Fallbacks()), strings.Join(gpu.Fallbacks(), "; "))
	}
	return m, s, nil
}

func parseDims(specs []string) (map[string]int, error) {
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
		Long: `run loads an ONNX model (opset 7 to 21, the operators listed at the end),
runs it --repeat times after one warm-up run and prints a summary of each
output and the median latency.

Weights come from the model's initializers or the external weights file it
names; when that file is absent, deterministic random weights are generated
and the command says so. Inputs come from --input files (ONNX TensorProto
.pb, one per model input, in order) or are random.

--expect checks the outputs against reference files (ONNX TensorProto .pb,
one per model output, in order), as ONNX's test runner does with
test_data_set_N/output_K.pb: every element must satisfy
|got - want| <= atol + rtol*|want| (NaN matches NaN). The defaults, rtol
1e-3 and atol 1e-5, are what the runtime is held to on ONNX's own node
tests. The command fails at the first element out of tolerance and names
it.

Operators: ` + strings.Join(runtime.Ops(), ", ") + `.`,
		Example: `  rulebook run ../shared/models/resnet50.onnx --repeat 10
  rulebook run ../shared/models/squeezenet1_1-full.onnx --input ../shared/models/squeezenet1_1-full_test_data_set_0/input_0.pb
  rulebook run ../shared/models/squeezenet1_1-full.onnx --input ../shared/models/squeezenet1_1-full_test_data_set_0/input_0.pb --expect ../shared/models/squeezenet1_1-full_test_data_set_0/output_0.pb`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if repeat < 1 {
				return fmt.Errorf("--repeat must be at least 1, got %d", repeat)
			}
			if !(tol.RTol >= 0 && tol.ATol >= 0) || math.IsInf(tol.RTol+tol.ATol, 0) {
				return fmt.Errorf("--rtol and --atol must be finite and not negative, got %g and %g", tol.RTol, tol.ATol)
			}
			m, s, err := o.load(cmd.ErrOrStderr(), args[0])
			if err != nil {
				return err
			}
			defer s.Close()
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
			var outs map[string]*runtime.Tensor
			median, err := timing.Repeat(cmd.Context(), repeat, timing.Wall(func() (err error) {
				outs, err = s.Run(cmd.Context(), feeds)
				return err
			}))
			if err != nil {
				return err
			}
			printOutputs(cmd.OutOrStdout(), m, outs)
			fmt.Fprintf(cmd.OutOrStdout(), "median latency %s over %d runs (%s backend, %s)\n",
				median.Round(time.Microsecond), repeat, o.backend, filepath.Base(args[0]))
			if len(expect) == 0 {
				return nil
			}
			if err := m.CheckOutputs(outs, refs, tol); err != nil {
				return fmt.Errorf("--expect: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "outputs match their references (rtol %g, atol %g); relative error %.2g\n", tol.RTol, tol.ATol, m.RelativeError(outs, refs))
			return nil
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

func printOutputs(w io.Writer, m *runtime.Model, outs map[string]*runtime.Tensor) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OUTPUT\tSHAPE\tMIN\tMAX\tMEAN\tFIRST VALUES")
	for _, o := range m.Outputs() {
		t := outs[o.Name]
		lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
		for _, v := range t.Data {
			lo, hi, sum = math.Min(lo, float64(v)), math.Max(hi, float64(v)), sum+float64(v)
		}
		first := make([]string, min(4, len(t.Data)))
		for i := range first {
			first[i] = strconv.FormatFloat(float64(t.Data[i]), 'g', 5, 32)
		}
		fmt.Fprintf(tw, "%s\t%v\t%.5g\t%.5g\t%.5g\t%s\n", o.Name, t.Shape, lo, hi, sum/float64(max(1, len(t.Data))), strings.Join(first, " "))
	}
	tw.Flush()
}

func newBenchOpsCmd() *cobra.Command {
	var (
		o      modelOptions
		repeat int
	)
	cmd := &cobra.Command{
		Use:   "bench-ops MODEL.onnx",
		Short: "Time each distinct operator configuration of a model and store the costs",
		Long: `bench-ops loads a model and times every distinct operator configuration in
it (operator, input and output shapes, and the attributes that affect
cost) alone, on random inputs, --repeat times, and stores the median in the
database's op_costs table for the device (e.g. cpu/2 for the CPU backend with
2 threads). A configuration measured before is replaced. The optimizer
reads the table back by (device, operator, shapes, parameters).`,
		Example: "  rulebook bench-ops ../shared/models/resnet50.onnx --repeat 10",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if repeat < 1 {
				return fmt.Errorf("--repeat must be at least 1, got %d", repeat)
			}
			m, s, err := o.load(cmd.ErrOrStderr(), args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			db, err := store.Open(cmd.Context(), dbPath(cmd))
			if err != nil {
				return err
			}
			defer db.Close()
			return benchOps(cmd, db, m, s, args[0], o, repeat)
		},
	}
	o.register(cmd)
	cmd.Flags().IntVar(&repeat, "repeat", 10, "timed runs per configuration")
	return cmd
}

func benchOps(cmd *cobra.Command, db *store.Store, m *runtime.Model, s runtime.Executor, path string, o modelOptions, repeat int) error {
	bar := progress.New(cmd.ErrOrStderr(), false)
	runID, costs, err := optimizer.BenchOps(cmd.Context(), db, m, s, path, repeat, o.seed, version, bar.Stage("bench-ops"))
	bar.Finish()
	if err != nil {
		return err
	}
	optimizer.WriteCostTotals(cmd.OutOrStdout(), m.Nodes(), costs)
	fmt.Fprintf(cmd.OutOrStdout(), "stored %d operator configurations for %s (run %d)\n", len(costs), s.DeviceKey(), runID)
	return nil
}
