package plan

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"rulebook/cluster"
	"rulebook/internal/checked"
	"rulebook/profile"
	"rulebook/simulate"
	"rulebook/training"
)

// Memory is one device's memory by category, in bytes.
type Memory struct {
	Weights     float64 `json:"weights"`
	Gradients   float64 `json:"gradients"`
	Optimizer   float64 `json:"optimizer_state"`
	Activations float64 `json:"saved_activations"`
	// CastCopies are autocast's 16-bit copies of the weights products
	// and convolutions read, kept for the step (its cast cache); 0 in
	// fp32 and tf32.
	CastCopies float64 `json:"autocast_weight_copies,omitempty"`
}

// Total is the sum of the categories.
func (m Memory) Total() float64 {
	return m.Weights + m.Gradients + m.Optimizer + m.Activations + m.CastCopies
}

// Time is one device's simulated step, in seconds: Compute plus
// ExposedCommunication plus Idle is Step.
type Time struct {
	Step                 float64 `json:"step_s"`
	Compute              float64 `json:"compute_s"`
	ExposedCommunication float64 `json:"exposed_communication_s"`
	Idle                 float64 `json:"idle_s"`
}

// Result is one strategy priced: its simulated step on the representative
// device of the slowest stage, the memory of the fullest device, and the
// layout of each operator.
type Result struct {
	Strategy Strategy
	Time     Time
	Memory   Memory
	Fits     bool
	Layouts  []OpLayout
	Stage    []int // pipeline stage of each operator
	Schedule *simulate.Schedule
	// Costs are each operator's times for one micro-batch on its stage's
	// device, and what priced them; Optimizer is the slowest stage's
	// optimizer step.
	Costs     []OpCost
	Optimizer OpCost
	Err       error // why the strategy cannot run (e.g. the batch does not divide)

	block  []int   // each operator's block (recomputation's unit), −1 outside any
	tables *tables // where the embedding tables lie, in the emb family
}

// Options are what every strategy is priced under.
type Options struct {
	Machine cluster.Machine
	// MemoryLimit is the usable memory per device in bytes; 0 means the
	// device's capacity.
	MemoryLimit float64
	// Microbatches per pipeline step; 0 means twice the stages.
	Microbatches int
	// Attention is how attention groups are priced: fused (the default)
	// or unfused, as the graph writes them.
	Attention Attention
	// BucketBytes closes a data-parallel gradient bucket once it holds this
	// many bytes, as PyTorch DDP's bucket_cap_mb does (DefaultBucketBytes);
	// 0 gives every weight its own all-reduce.
	BucketBytes float64
	// Precision is the arithmetic priced; "" means the device's default
	// (cluster.Device.DefaultPrecision).
	Precision cluster.Precision
	// Profile holds measured operator times for the device, or nil for
	// the roofline alone.
	Profile *profile.Profile
	// Optimizer is the Adam implementation priced; "" is DefaultOptimizer.
	Optimizer Optimizer
	// Substitutions are the pinned version's rules the joint family may
	// apply; without them (or without a parallel rule among them) it is
	// not searched.
	Substitutions *Substitutions
	// Sequential makes the joint family optimise as TASO then FlexFlow
	// would, one after the other: every product fused with its relu
	// first, the layouts searched after (Unity's Figure 15b baseline).
	Sequential bool
	// Levers are the memory levers a strategy that does not fit may pull;
	// 0 allows all.
	Levers LeverSet
}

// Optimizer is the implementation of torch.optim.Adam priced: fused
// (fused=True, one kernel for every tensor) or foreach (grouped kernels).
type Optimizer string

// The Adam implementations, as --optimizer spells them.
const (
	FusedAdam   Optimizer = "fused"
	ForeachAdam Optimizer = "foreach"
	// DefaultOptimizer is what the planner prices unless told:
	// torch.optim.Adam's own default on a GPU when neither flag is given
	// (foreach; fused is opt-in).
	DefaultOptimizer = ForeachAdam
)

// ParseOptimizer reads an --optimizer value.
func ParseOptimizer(s string) (Optimizer, error) {
	switch o := Optimizer(s); o {
	case FusedAdam, ForeachAdam:
		return o, nil
	}
	return "", fmt.Errorf("unknown optimizer %q (known: fused, foreach)", s)
}

func (o Options) optimizer() Optimizer { return cmp.Or(o.Optimizer, DefaultOptimizer) }

// precision is the precision priced.
func (o Options) precision() cluster.Precision {
	if o.Precision != "" {
		return o.Precision
	}
	return o.Machine.Device.DefaultPrecision()
}

// Attention is how the planner prices the graph's attention groups
// (training.Attention).
type Attention string

// The attention modes, as --attention spells them.
const (
	// FusedAttention prices each group as one fused kernel, as PyTorch's
	// scaled_dot_product_attention runs it: no scores kept for backward.
	FusedAttention Attention = "fused"
	// UnfusedAttention keeps the graph as written.
	UnfusedAttention Attention = "unfused"
)

// ParseAttention reads an --attention value.
func ParseAttention(s string) (Attention, error) {
	switch a := Attention(s); a {
	case FusedAttention, UnfusedAttention:
		return a, nil
	}
	return "", fmt.Errorf("unknown attention %q (known: fused, unfused)", s)
}

// attention is the mode in force: fused unless unfused is asked for.
func (o Options) attention() Attention {
	if o.Attention == UnfusedAttention {
		return UnfusedAttention
	}
	return FusedAttention
}

// graph is g as the options price it: with its attention fused unless
// they say unfused.
func (o Options) graph(g *training.Graph) *training.Graph {
	if o.attention() == UnfusedAttention {
		return g
	}
	return g.FuseAttention()
}

// DefaultBucketBytes is PyTorch DDP's default bucket, 25 MiB.
const DefaultBucketBytes = 25 << 20

// maxBucketBytes bounds --bucket-mb: a tebibyte, more than any model's
// gradients, so one bucket holds them all.
const maxBucketBytes = 1 << 40

// MaxTasks bounds the simulator tasks of one strategy's step: operators
// times micro-batches times forward and backward. A step past it (a huge
// --microbatches, or a batch split that finely) is not priced, rather
// than allocated.
const MaxTasks = 1 << 20

// maxMemoryLimit bounds --memory-limit: a pebibyte per device.
const maxMemoryLimit = 1 << 50

// validate checks the machine and the numbers a request sets before any
// strategy is priced.
func (o Options) validate() error {
	if err := o.Machine.Validate(); err != nil {
		return fmt.Errorf("machine %s: %w", o.Machine.Name, err)
	}
	if err := checked.Real("the memory limit (bytes)", o.MemoryLimit, 0, maxMemoryLimit); err != nil {
		return err
	}
	d := o.Machine.Device
	if err := d.CheckPrecision(o.precision()); err != nil {
		return fmt.Errorf("machine %s: %w", o.Machine.Name, err)
	}
	if o.Profile != nil {
		if err := o.Profile.CheckPrecisions(d.Name, d.Has); err != nil {
			return err
		}
	}
	if o.Optimizer != "" {
		if _, err := ParseOptimizer(string(o.Optimizer)); err != nil {
			return err
		}
	}
	if o.Attention != "" {
		if _, err := ParseAttention(string(o.Attention)); err != nil {
			return err
		}
	}
	if err := checked.Real("the gradient bucket (bytes)", o.BucketBytes, 0, maxBucketBytes); err != nil {
		return err
	}
	return checked.Count("the micro-batches", int64(o.Microbatches), 0, MaxTasks)
}

func (o Options) memoryLimit() float64 {
	if o.MemoryLimit > 0 {
		return o.MemoryLimit
	}
	return o.Machine.Device.MemoryBytes
}

// CostModel names how Price times operators, for every printed figure:
// the precision, and the profile where one is used.
func (o Options) CostModel() string {
	p := o.precision()
	prec := string(p) + " mixed precision (autocast: products in " + string(p) + ", weights and Adam state in fp32)"
	if p == cluster.TF32 || p == cluster.FP32 {
		prec = string(p)
	}
	ops := "roofline (max of FLOPs at the " + string(p) + " peak and bytes at memory bandwidth)"
	if o.Profile != nil {
		ops = "measured operator costs from " + o.Profile.Name + " (exact match, else a fit per operator class, else the roofline); Adam " + string(o.optimizer())
	}
	return prec + "; " + ops + "; NCCL-style α–β collectives (ring or tree)"
}

// Price simulates one training step of g under s.
func Price(ctx context.Context, g *training.Graph, s Strategy, o Options) (*Result, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	g = o.graph(g)
	r, err := prepare(g, s, o)
	if err != nil {
		return nil, err
	}
	if r.Err == nil {
		if err := simulateStep(ctx, g, r, o); err != nil {
			return nil, err
		}
	}
	if s.Kind == Joint && !o.Sequential {
		return greedyIfFaster(ctx, g, r, o)
	}
	return r, nil
}

// greedyIfFaster prices a joint candidate's factorisation with the greedy
// Megatron layouts too and keeps the faster plan: the search ranks
// layouts by a sum of costs (jointPricer), the simulator overlaps them,
// and the greedy layouts are a point of the search's space, so the
// joint family never returns a plan slower than the grid's.
func greedyIfFaster(ctx context.Context, g *training.Graph, r *Result, o Options) (*Result, error) {
	s := r.Strategy
	s.Kind = Grid
	alt, err := prepare(g, s, o)
	if err != nil || alt.Err != nil || slices.Equal(alt.Layouts, r.Layouts) || !o.Substitutions.allowAll(g, alt.Layouts) {
		return r, err
	}
	if err := simulateStep(ctx, g, alt, o); err != nil {
		return nil, err
	}
	searchedWins := r.Err == nil && (r.Fits && !alt.Fits || r.Fits == alt.Fits && r.Time.Step <= alt.Time.Step)
	if alt.Err != nil || searchedWins {
		return r, nil
	}
	alt.Strategy.Kind = Joint
	return alt, nil
}

// prepare lays the strategy out (tensor-parallel layouts, pipeline
// stages, blocks) and counts its memory, all before any simulation: a
// lever that does not fit is never simulated.
func prepare(g *training.Graph, s Strategy, o Options) (*Result, error) {
	if err := s.divides(g.Batch); err != nil {
		return &Result{Strategy: s, Err: err}, nil
	}
	if err := s.fits(o.Machine.NumDevices()); err != nil {
		return nil, err
	}
	if err := s.taskBound(len(g.Ops)); err != nil {
		return &Result{Strategy: s, Err: err}, nil
	}
	c := newCosts(o.Machine.Device, o.precision(), o.Profile)
	r := &Result{Strategy: s, Stage: stages(g, s.PP, c), block: blocks(g)}
	if s.Kind == Joint {
		r.Layouts = jointLayouts(g, s, o, c)
	} else {
		r.Layouts = assignTensorParallel(g, s.TP)
	}
	if err := cutsSomething(r.Layouts, s.TP, s.Kind == Joint); err != nil {
		return &Result{Strategy: s, Err: err}, nil
	}
	if s.Embedding == RowWise {
		if err := rowsDivide(g, s.DP); err != nil {
			return &Result{Strategy: s, Err: err}, nil
		}
	}
	if s.Embedding == ColumnWise {
		if err := columnsCut(g, s.DP); err != nil {
			return &Result{Strategy: s, Err: err}, nil
		}
	}
	if s.Embedding != "" {
		r.tables = placeTables(g, s.Embedding, s.DP)
	}
	r.Memory = memory(g, s, r, o.precision().ActivationBytes())
	r.Fits = r.Memory.Total() <= o.memoryLimit()
	return r, nil
}

// simulateStep runs the step's task graph and sets r's time.
func simulateStep(ctx context.Context, g *training.Graph, r *Result, o Options) error {
	b := newBuilder(g, r.Strategy, o, r, newCosts(o.Machine.Device, o.precision(), o.Profile))
	sched, err := b.run(ctx)
	if err != nil {
		return fmt.Errorf("simulate %s: %w", r.Strategy, err)
	}
	r.Schedule = sched
	r.Time = b.slowest(sched)
	if !finite(r.Time.Step) || !finite(r.Memory.Total()) {
		// never choose a plan whose figures are not numbers
		r.Err = fmt.Errorf("its step (%v s) or memory (%v bytes) is not a finite number: %w", r.Time.Step, r.Memory.Total(), checked.ErrRange)
	}
	return nil
}

// stages cuts the operators into pp contiguous stages of about equal
// forward and backward time at the whole batch; a graph with no work (or
// none the cost model can weigh) is cut into stages of equal operator
// counts.
func stages(g *training.Graph, pp int, c *costs) []int {
	out := make([]int, len(g.Ops))
	if pp <= 1 {
		return out
	}
	weight := make([]float64, len(g.Ops))
	var total float64
	for i, t := range c.all(g, make([]OpLayout, len(g.Ops)), 1, 1) {
		weight[i] = t.Forward + t.Backward
		total += weight[i]
	}
	if total <= 0 || !finite(total) {
		for i := range weight {
			weight[i] = 1
		}
		total = float64(len(weight))
	}
	var acc float64
	for i := range g.Ops {
		acc += weight[i]
		out[i] = max(0, min(pp-1, int(acc/total*float64(pp)-1e-9)))
		if i > 0 && out[i] < out[i-1] {
			out[i] = out[i-1]
		}
	}
	return out
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
