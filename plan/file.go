package plan

import (
	"encoding/json"
	"io"

	"rulebook/cluster"
	"rulebook/training"
)

// File is the plan as written to plan.json.
type File struct {
	Format      string          `json:"format"`
	Simulated   string          `json:"simulated"`
	CostModel   string          `json:"cost_model"`
	Precision   string          `json:"precision"`
	Model       string          `json:"model"`
	Machine     cluster.Machine `json:"machine"`
	Batch       int64           `json:"global_batch"`
	Strategy    Strategy        `json:"strategy"`
	Time        Time            `json:"time"`
	Memory      Memory          `json:"memory_per_device"`
	MemoryLimit float64         `json:"memory_limit"`
	BucketBytes float64         `json:"gradient_bucket_bytes"`
	Fits        bool            `json:"fits"`
	Stages      []StageFile     `json:"stages"`
	Operators   []OperatorFile  `json:"operators"`
	Optimizer   OpCost          `json:"optimizer_step"`
	Compared    []Compared      `json:"compared"`
	Attention   Attention       `json:"attention"`
	Levers      []string        `json:"memory_levers,omitempty"` // what the chosen strategy needs to fit
	// LeverOptions are each lever family's fastest plan alone for the
	// chosen strategy, when it needs a lever.
	LeverOptions []LeverOption `json:"lever_options,omitempty"`
	// Tables is where the embedding tables lie, in the emb family.
	Tables []TableFile `json:"embedding_tables,omitempty"`
	// Substitutions are the pinned version's rules a joint plan applies.
	Substitutions *Citations `json:"substitutions,omitempty"`
}

// StageFile is one pipeline stage: its devices, node-major.
type StageFile struct {
	Stage   int   `json:"stage"`
	Devices []int `json:"devices"`
}

// OperatorFile is one operator's placement: its stage's device group and
// the parallel degrees of its output (batch cut DP ways, features TP ways
// where its style cuts them), with its tensor-parallel style.
type OperatorFile struct {
	Name    string `json:"name"`
	Module  string `json:"module,omitempty"`
	Type    string `json:"type"`
	Style   Style  `json:"style"`
	Stage   int    `json:"stage"`
	Degrees []int  `json:"degrees"`
	// Groups, where above 1, is how many equal blocks the tensor-parallel
	// cut axis holds, each cut into its degree, device i taking piece i of
	// every block: a packed q, k, v projection (3) cut by heads, or heads
	// merged with the batch (docs/planner.md, "Strategies").
	Groups int `json:"groups,omitempty"`
	// Cost is the operator's simulated time for one micro-batch on one
	// device of its stage, and what priced it.
	Cost OpCost `json:"cost"`
}

// Compared is one line of the comparison table.
type Compared struct {
	Strategy Strategy `json:"strategy"`
	Time     *Time    `json:"time,omitempty"`
	Memory   *Memory  `json:"memory_per_device,omitempty"`
	Fits     bool     `json:"fits"`
	Error    string   `json:"error,omitempty"`
}

// FileFormat names plan.json's schema.
const FileFormat = "rulebook.plan/1"

// NewFile is the chosen plan, ready to write.
func (c *Choice) NewFile(g *training.Graph) *File {
	r := c.Chosen
	f := &File{Format: FileFormat, Simulated: Simulated, CostModel: c.Options.CostModel(), Precision: string(c.Options.precision()), Model: c.Model, Machine: c.Machine,
		Batch: c.Batch, Strategy: r.Strategy, Attention: c.Options.attention(), Levers: r.Strategy.leverNames(), Optimizer: r.Optimizer, Time: r.Time, Memory: r.Memory, MemoryLimit: c.Options.memoryLimit(),
		BucketBytes: c.Options.BucketBytes, Fits: r.Fits, LeverOptions: c.LeverOptions}
	s := r.Strategy
	for st := 0; st < s.PP; st++ {
		sf := StageFile{Stage: st}
		for d := 0; d < s.DP*s.TP; d++ {
			sf.Devices = append(sf.Devices, st*s.DP*s.TP+d)
		}
		f.Stages = append(f.Stages, sf)
	}
	for i, op := range g.Ops {
		f.Operators = append(f.Operators, OperatorFile{Name: op.Name, Module: op.Module, Type: op.Type,
			Style: r.Layouts[i].Style, Stage: r.Stage[i], Degrees: outputDegrees(g, op, s, r.Layouts[i]), Groups: r.Layouts[i].Groups, Cost: r.Costs[i]})
	}
	f.Tables = r.tableFiles(g)
	if r.Strategy.Kind == Joint {
		f.Substitutions = c.Citations
	}
	for _, x := range c.Results {
		cf := Compared{Strategy: x.Strategy, Fits: x.Fits}
		if x.Err != nil {
			cf.Error = x.Err.Error()
		} else {
			t, m := x.Time, x.Memory
			cf.Time, cf.Memory = &t, &m
		}
		f.Compared = append(f.Compared, cf)
	}
	return f
}

// outputDegrees is the number of pieces each dimension of op's first
// output is cut into: the batch (training.Graph.BatchAxisOf) by DP, the layout's cut
// axis by TP when the operator works on slices.
func outputDegrees(g *training.Graph, op training.Op, s Strategy, l OpLayout) []int {
	rank := len(g.ValueShape(op.Outputs[0]))
	if rank == 0 {
		return nil
	}
	d := make([]int, rank)
	for i := range d {
		d[i] = 1
	}
	if k := g.BatchAxisOf(op.Outputs[0]); k >= 0 {
		d[k] = s.DP
	}
	if l.sliced() && l.Axis < rank {
		d[l.Axis] *= s.TP
	}
	return d
}

// Write writes the file as indented JSON.
func (f *File) Write(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(f)
}
