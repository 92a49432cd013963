package plan

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"rulebook/cluster"
	"rulebook/internal/checked"
	"rulebook/internal/outfile"
	"rulebook/onnx"
	"rulebook/profile"
	"rulebook/simulate"
	"rulebook/training"
	"rulebook/version"
)

// Request is one 'rulebook plan' invocation.
type Request struct {
	// Model is an ONNX file or a built-in workload's name
	// (training.BuiltinNames).
	Model string
	// Machine is a preset ("summit:16") or a machine JSON file.
	Machine string
	// Batch is the global batch, or the batch per data-parallel replica
	// when PerDevice is set; 0 takes the model's own fixed batch.
	Batch     int64
	PerDevice bool
	// Strategy is one family, or "" for all of them.
	Strategy     string
	MemoryLimit  float64
	Microbatches int
	// Attention is fused (the default, also for "") or unfused.
	Attention string
	// BucketBytes is the data-parallel gradient bucket
	// (Options.BucketBytes); 0 gives every weight its own all-reduce.
	BucketBytes float64
	// Out is plan.json's path; beside it go NAME.trace.json (Chrome
	// trace) and NAME.sharded.onnx (IR 11 sharding). "" writes nothing.
	Out string
	// Emit "torch" also writes NAME.torch.json, a DTensor plan.
	Emit string
	// Rules is a pinned, hash-checked rule version, or nil. The header
	// names it; the hand-coded strategies do not use its rules yet.
	Rules *version.Set
	// Precision is bf16, fp16, tf32 or fp32; "" is the device's default.
	Precision string
	// Profile is a device profile of measured operator times; "" uses the
	// preset's shipped profile where it has one, NoProfile none.
	Profile string
	// Optimizer is fused or foreach Adam; "" is DefaultOptimizer.
	Optimizer string
	// Pareto also prices every lever set of every strategy for the
	// time/memory frontier (pareto.go), printed and, with Out, written
	// as NAME.pareto.csv and NAME.pareto.svg.
	Pareto bool
	// Levers restricts the memory levers (ParseLevers): "" allows all.
	Levers string
}

// NoProfile as Request.Profile prices with the roofline alone.
const NoProfile = "none"

// presetProfiles are the shipped profiles of the presets measured on real
// hardware.
var presetProfiles = map[string]string{"h200": "h200-torch2.11-ops.csv"}

// loadProfile is the request's profile: its file, the preset's shipped
// one, or nil.
func loadProfile(req Request) (*profile.Profile, error) {
	switch {
	case req.Profile == NoProfile:
		return nil, nil
	case req.Profile != "":
		return profile.Load(req.Profile)
	case cluster.IsFile(req.Machine):
		return nil, nil
	}
	preset, _, _ := strings.Cut(req.Machine, ":")
	if name, ok := presetProfiles[preset]; ok {
		return profile.Builtin(name)
	}
	return nil, nil
}

// Outcome is what Run priced and wrote.
type Outcome struct {
	Choice *Choice
	Graph  *training.Graph
	// Frontier is the time/memory frontier, when the request asked.
	Frontier []Point
	Written  []string
}

// WriteText prints the comparison, each operator's costs when explain is
// set, and, when written is set, the files written.
func (o *Outcome) WriteText(w io.Writer, explain, written bool) error {
	if err := o.Choice.WriteTable(w); err != nil {
		return err
	}
	if explain {
		if err := o.Choice.WriteExplain(w, o.Graph); err != nil {
			return err
		}
	}
	if o.Frontier != nil {
		if err := WriteFrontier(w, o.Frontier, o.Choice.Options.CostModel()); err != nil {
			return err
		}
	}
	for i := 0; written && i < len(o.Written); i++ {
		if _, err := fmt.Fprintln(w, "wrote", o.Written[i]); err != nil {
			return err
		}
	}
	return nil
}

// Run loads the model and machine, prices the strategies and writes the
// chosen plan's files. Every path is checked before the work starts, and
// each file appears whole or not at all.
func Run(ctx context.Context, req Request) (*Outcome, error) {
	m, err := cluster.Parse(req.Machine)
	if err != nil {
		return nil, err
	}
	kinds := Kinds
	if req.Strategy != "" {
		k, err := ParseKind(req.Strategy)
		if err != nil {
			return nil, err
		}
		kinds = []Kind{k}
	}
	if req.Batch < 0 {
		return nil, fmt.Errorf("--batch must not be negative, got %d", req.Batch)
	}
	if req.Emit != "" && req.Emit != "torch" {
		return nil, fmt.Errorf("--emit: unknown engine %q (known: torch)", req.Emit)
	}
	opts := Options{Machine: m, MemoryLimit: req.MemoryLimit, Microbatches: req.Microbatches, BucketBytes: req.BucketBytes}
	if req.Attention != "" {
		if opts.Attention, err = ParseAttention(req.Attention); err != nil {
			return nil, fmt.Errorf("--attention: %w", err)
		}
	}
	if req.Precision != "" {
		if opts.Precision, err = cluster.ParsePrecision(req.Precision); err != nil {
			return nil, fmt.Errorf("--precision: %w", err)
		}
	}
	if req.Optimizer != "" {
		if opts.Optimizer, err = ParseOptimizer(req.Optimizer); err != nil {
			return nil, fmt.Errorf("--optimizer: %w", err)
		}
	}
	if opts.Levers, err = ParseLevers(req.Levers); err != nil {
		return nil, fmt.Errorf("--levers: %w", err)
	}
	if opts.Profile, err = loadProfile(req); err != nil {
		return nil, err
	}
	if req.Rules != nil {
		if opts.Substitutions, err = NewSubstitutions(req.Rules); err != nil {
			return nil, err
		}
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	paths := outputPaths(req)
	if err := outfile.Distinct(inputs(req), named(paths)); err != nil {
		return nil, err
	}
	for _, p := range paths {
		if err := outfile.Check(p); err != nil {
			return nil, err
		}
	}
	model, name, err := loadModel(req.Model)
	if err != nil {
		return nil, err
	}
	batch := req.Batch
	if req.PerDevice && batch > 0 {
		if batch, err = checked.Mul(batch, int64(m.NumDevices())); err != nil {
			return nil, fmt.Errorf("--batch %d per device on %d devices: %w", req.Batch, m.NumDevices(), err)
		}
	}
	g, err := training.FromONNX(model, name, batch)
	if err != nil {
		return nil, err
	}
	c, err := Choose(ctx, g, kinds, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c.Rules = req.Rules
	out := &Outcome{Choice: c, Graph: g}
	if req.Pareto {
		if out.Frontier, err = Frontier(ctx, g, kinds, opts); err != nil {
			return nil, fmt.Errorf("%s: the time/memory frontier: %w", name, err)
		}
	}
	if req.Out == "" {
		return out, nil
	}
	return out, c.write(model, g, req, paths, out)
}

func loadModel(spec string) (*onnx.Model, string, error) {
	if !strings.HasSuffix(spec, ".onnx") {
		m, err := training.Builtin(spec)
		return m, spec, err
	}
	m, err := onnx.ReadModel(spec)
	return m, strings.TrimSuffix(filepath.Base(spec), ".onnx"), err
}

// outputPaths are the files a request writes, plan.json first.
func outputPaths(req Request) []string {
	if req.Out == "" {
		return nil
	}
	stem := strings.TrimSuffix(req.Out, ".json")
	ps := []string{req.Out, stem + ".trace.json", stem + ".sharded.onnx"}
	if req.Emit == "torch" {
		ps = append(ps, stem+".torch.json")
	}
	if req.Pareto {
		ps = append(ps, stem+".pareto.csv", stem+".pareto.svg")
	}
	return ps
}

// inputs are the files a request reads: no output may be one of them.
func inputs(req Request) []outfile.Named {
	var in []outfile.Named
	if strings.HasSuffix(req.Model, ".onnx") {
		in = append(in, outfile.Named{Path: req.Model, Role: "the model"})
	}
	if cluster.IsFile(req.Machine) {
		in = append(in, outfile.Named{Path: req.Machine, Role: "the machine file"})
	}
	if req.Profile != "" && req.Profile != NoProfile {
		in = append(in, outfile.Named{Path: req.Profile, Role: "the profile"})
	}
	return in
}

// named gives the output paths their roles for Distinct's message: the
// plan is -o, the rest are derived from it.
func named(paths []string) []outfile.Named {
	out := make([]outfile.Named, len(paths))
	for i, p := range paths {
		out[i] = outfile.Named{Path: p, Role: "derived from -o"}
	}
	if len(out) > 0 {
		out[0].Role = "-o"
	}
	return out
}

func (c *Choice) write(model *onnx.Model, g *training.Graph, req Request, paths []string, out *Outcome) error {
	sharded, err := c.Sharded(model, g)
	if err != nil {
		return err
	}
	var torch *TorchPlan
	if req.Emit == "torch" {
		if torch, err = c.Torch(g); err != nil {
			return err
		}
	}
	writers := []func(io.Writer) error{
		c.NewFile(g).Write,
		func(w io.Writer) error {
			return simulate.WriteChromeTrace(w, c.Chosen.Schedule, fmt.Sprintf("%s on %s: %s", c.Model, c.Machine.Name, c.Chosen.Strategy))
		},
		func(w io.Writer) error { _, err := w.Write(onnx.EncodeModel(sharded)); return err },
	}
	if torch != nil {
		writers = append(writers, torch.Write)
	}
	if req.Pareto {
		title := fmt.Sprintf("%s on %s, batch %d: time/memory frontier (simulated)", c.Model, c.Machine.Name, c.Batch)
		writers = append(writers,
			func(w io.Writer) error { return WriteFrontierCSV(w, out.Frontier) },
			func(w io.Writer) error { return WriteFrontierSVG(w, out.Frontier, c.Options.memoryLimit(), title) })
	}
	for i, write := range writers {
		if err := outfile.Write(paths[i], write); err != nil {
			return err
		}
		out.Written = append(out.Written, paths[i])
	}
	return nil
}
