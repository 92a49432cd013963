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
	"rulebook/internal/safetext"
	"rulebook/optimizer"
	"rulebook/runtime"
	"rulebook/runtime/backend"
	"rulebook/store"
)

// modelOptions are the flags every command that loads a model shares.
type modelOptions struct {
	backend, weights, ortLib string
	seed                     uint64
	threads                  int
	dims                     []string
}

func (o *modelOptions) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.backend, "backend", "cpu", "cpu, cuda or ort (ONNX Runtime); run takes a list, cpu,ort, to time them side by side")
	f.StringVar(&o.ortLib, "ort-lib", "", "libonnxruntime.so for --backend ort (default: $ONNXRUNTIME_LIB, then python3's onnxruntime package, then the library directories)")
	f.StringVar(&o.weights, "weights", "auto", "auto (the model's weights file, else random), file, or random")
	f.Uint64Var(&o.seed, "seed", 1, "seed of generated weights and inputs")
	f.IntVar(&o.threads, "threads", 0, "CPU threads (default: all cores)")
	f.StringSliceVar(&o.dims, "dim", nil, "value of a symbolic input dimension, NAME=N (repeatable)")
}

// load reads a model and opens an executor on each backend named, in
// order; notes (generated weights) go to stderr. The caller closes them.
func (o *modelOptions) load(cmd *cobra.Command, path string) (*runtime.Model, []runtime.Executor, []string, error) {
	opt := backend.Options{Threads: o.threads, ORTLibrary: o.ortLib, Load: runtime.LoadOptions{Seed: o.seed}}
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
		Long: `run loads an ONNX model (opset 7 to 21, the operators listed at the end),
runs it --repeat times after one warm-up run and prints a summary of each
output and the median latency.

Weights come from the model's initializers or the external weights file it
names; when that file is absent, deterministic random weights are generated
and the command says so. Inputs come from --input files (ONNX TensorProto
.pb, one per model input, in order, of the input's type FLOAT: a file of
another type is refused, not converted) or are random.

--expect checks the outputs against reference files (ONNX TensorProto .pb,
one per model output, in order), as ONNX's test runner does with
test_data_set_N/output_K.pb: every element must satisfy
|got - want| <= atol + rtol*|want| (NaN matches NaN). The defaults, rtol
1e-3 and atol 1e-5, are what the runtime is held to on ONNX's own node
tests. The command fails at the first element out of tolerance and names
it.

--backend ort runs the model in ONNX Runtime (its CPU provider, --threads
intra-op threads, sequentially) with the same weights and inputs; the
library is loaded at run time from --ort-lib, $ONNXRUNTIME_LIB or pip's
onnxruntime package. Before it is loaded, the library is checked as far as
a file can be: a regular file, an ELF shared object for this machine, every
segment inside the file (a truncated copy is refused). Its code cannot be
checked: a library damaged within those bounds can still crash the process
as it loads. A list, --backend cpu,ort, runs the backends side by
side in one process, alternating after a warm-up run each, and prints each
median, its ratio to the first's and how far its outputs are from the
first's.

Operators: ` + strings.Join(runtime.Ops(), ", ") + `.`,
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
				printOutputs(cmd.OutOrStdout(), m, results[0].Outputs)
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
		fmt.Fprintf(tw, "%s\t%v\t%.5g\t%.5g\t%.5g\t%s\n", safetext.Name(o.Name), t.Shape, lo, hi, sum/float64(max(1, len(t.Data))), strings.Join(first, " "))
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
2 threads, ort-cpu/2 for ONNX Runtime with 2, each configuration a one-node
model). A configuration measured before is replaced. The optimizer reads
the table back by (device, operator, shapes, parameters).`,
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
