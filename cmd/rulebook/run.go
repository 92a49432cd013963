package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"rulebook/onnx"
	"rulebook/runtime"
	"rulebook/runtime/cuda"
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

// executor runs a loaded model: a CPU Session or a CUDASession.
type executor interface {
	Run(ctx context.Context, inputs map[string]*runtime.Tensor) (map[string]*runtime.Tensor, error)
	TimeNode(ctx context.Context, i int, repeat int) (time.Duration, error)
}

// load reads a model and opens a session on the chosen backend; warnings
// (generated weights) go to w. The caller closes the session.
func (o *modelOptions) load(w io.Writer, path string) (*runtime.Model, executor, func(), error) {
	if err := checkBackend(o.backend); err != nil {
		return nil, nil, nil, err
	}
	mode := runtime.WeightsMode(o.weights)
	if mode != "auto" && mode != "file" && mode != "random" {
		return nil, nil, nil, fmt.Errorf("--weights must be auto, file or random, got %q", o.weights)
	}
	dims, err := parseDims(o.dims)
	if err != nil {
		return nil, nil, nil, err
	}
	m, report, err := runtime.Load(path, runtime.LoadOptions{Weights: mode, Seed: o.seed, Dims: dims})
	if err != nil {
		return nil, nil, nil, err
	}
	if n := len(report.RandomWeights); n > 0 {
		fmt.Fprintf(w, "note: %d initializers have no data here (weights file absent); using random weights, seed %d\n", n, o.seed)
	}
	if o.backend == "cuda" {
		s, err := m.NewCUDASession()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--backend cuda: %w", err)
		}
		if fb := s.Fallbacks(); len(fb) > 0 {
			fmt.Fprintf(w, "note: %d nodes run on the CPU: %s\n", len(fb), strings.Join(fb, "; "))
		}
		return m, s, func() { s.Close() }, nil
	}
	s, err := m.NewSession(runtime.SessionOptions{Threads: o.threads})
	if err != nil {
		return nil, nil, nil, err
	}
	return m, s, func() {}, nil
}

// checkBackend refuses an unknown backend, and the CUDA backend where
// there is no GPU, before the model is read.
func checkBackend(name string) error {
	switch name {
	case "cpu":
		return nil
	case "cuda":
		if _, err := cuda.Probe(); err != nil {
			return fmt.Errorf("--backend cuda: %w", err)
		}
		return nil
	}
	return fmt.Errorf("--backend must be cpu or cuda, got %q", name)
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
		o      modelOptions
		inputs []string
		repeat int
	)
	cmd := &cobra.Command{
		Use:   "run MODEL.onnx",
		Short: "Run an ONNX model and print its outputs and median latency",
		Long: `run loads an ONNX model (opset 7 to 21, the operators 'rulebook run --help'
lists below), runs it --repeat times after one warm-up run and prints a
summary of each output and the median latency.

Weights come from the model's initializers or the external weights file it
names; when that file is absent, deterministic random weights are generated
and the command says so. Inputs come from --input files (ONNX TensorProto
.pb, one per model input, in order) or are random.

Operators: ` + strings.Join(runtime.Ops(), ", ") + `.`,
		Example: `  rulebook run ../shared/models/resnet50.onnx --repeat 10
  rulebook run squeezenet1_1-full.onnx --input test_data_set_0/input_0.pb`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if repeat < 1 {
				return fmt.Errorf("--repeat must be at least 1, got %d", repeat)
			}
			m, s, done, err := o.load(cmd.ErrOrStderr(), args[0])
			if err != nil {
				return err
			}
			defer done()
			feeds, err := readInputs(m, inputs, o.seed)
			if err != nil {
				return err
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
			return nil
		},
	}
	o.register(cmd)
	cmd.Flags().StringSliceVar(&inputs, "input", nil, "input tensor file (.pb), one per model input in order (default: random)")
	cmd.Flags().IntVar(&repeat, "repeat", 5, "timed runs after one warm-up run")
	return cmd
}

// readInputs reads one TensorProto per model input, checking shapes, or
// draws random inputs when none are given.
func readInputs(m *runtime.Model, paths []string, seed uint64) (map[string]*runtime.Tensor, error) {
	if len(paths) == 0 {
		return m.RandomInputs(seed), nil
	}
	want := m.Inputs()
	if len(paths) != len(want) {
		return nil, fmt.Errorf("--input: the model has %d inputs, got %d files", len(want), len(paths))
	}
	feeds := map[string]*runtime.Tensor{}
	for i, p := range paths {
		t, err := onnx.ReadTensor(p)
		if err != nil {
			return nil, err
		}
		values, err := t.Float64s()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		shape := t.Shape()
		if !slices.Equal(shape, want[i].Shape) {
			return nil, fmt.Errorf("%s: input %q has shape %v, but the model expects %v", p, want[i].Name, shape, want[i].Shape)
		}
		x := runtime.NewTensor(shape...)
		for k, v := range values {
			x.Data[k] = float32(v)
		}
		feeds[want[i].Name] = x
	}
	return feeds, nil
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
			m, s, done, err := o.load(cmd.ErrOrStderr(), args[0])
			if err != nil {
				return err
			}
			defer done()
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

func benchOps(cmd *cobra.Command, db *store.Store, m *runtime.Model, s executor, path string, o modelOptions, repeat int) error {
	ctx := cmd.Context()
	device := deviceName(o, s)
	configs := distinctConfigs(m.Nodes())
	config, _ := json.Marshal(map[string]any{"model": path, "device": device, "repeat": repeat, "configurations": len(configs)})
	runID, err := db.BeginRun(ctx, "bench-ops", string(config), o.seed, version)
	if err != nil {
		return err
	}
	bar := newProgress(cmd.ErrOrStderr(), false)
	var costs []store.OpCost
	for i, n := range configs {
		d, err := s.TimeNode(ctx, n.Index, repeat)
		if err != nil {
			bar.finish()
			return finishRun(ctx, db, store.Run{ID: runID}, fmt.Errorf("bench-ops: node %d (%s %s): %w", n.Index, n.Op, n.Name, err))
		}
		costs = append(costs, store.OpCost{Device: device, Operator: n.Op, Shapes: n.ShapeKey(), Params: n.Params,
			Median: d, Repeats: repeat, RunID: runID, MeasuredAt: time.Now()})
		bar.update(enumProgress("bench-ops", i+1, len(configs)))
	}
	bar.finish()
	run := store.Run{ID: runID, Status: "done", Candidates: int64(len(configs)), Stored: int64(len(costs))}
	if err := finishRun(ctx, db, run, db.RecordCosts(ctx, costs)); err != nil {
		return err
	}
	printCosts(cmd.OutOrStdout(), m.Nodes(), costs)
	fmt.Fprintf(cmd.OutOrStdout(), "stored %d operator configurations for %s (run %d)\n", len(costs), device, runID)
	return nil
}

// deviceName keys the cost table: the CPU backend with its thread count,
// or the GPU by name, since timings differ with either.
func deviceName(o modelOptions, s executor) string {
	if gpu, ok := s.(*runtime.CUDASession); ok {
		return "cuda/" + gpu.Device().Name
	}
	return runtime.CPUDevice(o.threads)
}

// distinctConfigs keeps the first node of each (operator, shapes,
// parameters) configuration.
func distinctConfigs(nodes []runtime.NodeInfo) []runtime.NodeInfo {
	seen := map[string]bool{}
	var out []runtime.NodeInfo
	for _, n := range nodes {
		key := n.Op + "|" + n.ShapeKey() + "|" + n.Params
		if !seen[key] {
			seen[key] = true
			out = append(out, n)
		}
	}
	return out
}

// printCosts prints the total time of each operator over the whole model
// (each node at its configuration's measured cost), largest first.
func printCosts(w io.Writer, nodes []runtime.NodeInfo, costs []store.OpCost) {
	byKey := map[string]time.Duration{}
	for _, c := range costs {
		byKey[c.Operator+"|"+c.Shapes+"|"+c.Params] = c.Median
	}
	type total struct {
		op    string
		nodes int
		sum   time.Duration
	}
	totals := map[string]*total{}
	var all time.Duration
	for _, n := range nodes {
		t := totals[n.Op]
		if t == nil {
			t = &total{op: n.Op}
			totals[n.Op] = t
		}
		d := byKey[n.Op+"|"+n.ShapeKey()+"|"+n.Params]
		t.nodes++
		t.sum += d
		all += d
	}
	list := make([]*total, 0, len(totals))
	for _, t := range totals {
		list = append(list, t)
	}
	slices.SortFunc(list, func(a, b *total) int { return int(b.sum - a.sum) })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "operator\tnodes\tsum of medians\tshare\t")
	for _, t := range list {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.1f%%\t\n", t.op, t.nodes, t.sum.Round(time.Microsecond), 100*float64(t.sum)/float64(max(all, 1)))
	}
	fmt.Fprintf(tw, "total\t%d\t%s\t\t\n", len(nodes), all.Round(time.Microsecond))
	tw.Flush()
}
