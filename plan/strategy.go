package plan

import (
	"fmt"
	"strings"

	"rulebook/internal/checked"
)

// Strategy is a parallelization of one training step: DP data-parallel
// replicas of TP tensor-parallel devices, in PP pipeline stages fed
// Microbatches micro-batches each (1F1B). DP·TP·PP devices take part.
// With one stage, Microbatches above 1 is gradient accumulation: that many
// forward and backward passes of batch/(DP·Microbatches), one optimizer
// step.
//
// ZeRO and Recompute are memory levers (levers.go), used only on a
// strategy that does not fit without them.
type Strategy struct {
	Kind         Kind `json:"kind"`
	DP           int  `json:"dp"`
	TP           int  `json:"tp"`
	PP           int  `json:"pp"`
	Microbatches int  `json:"microbatches"`
	// ZeRO shards over the data-parallel group Adam's state (stage 1),
	// also the gradients (2), also the weights (3, FSDP); 0 shards none.
	ZeRO int `json:"zero,omitempty"`
	// Recompute keeps only each block's inputs for backward and runs the
	// block's forward again before its backward.
	Recompute bool `json:"recompute,omitempty"`
	// Embedding, set only in the emb family, spreads the embedding tables
	// over the devices (embedding.go); the rest is data parallel.
	Embedding EmbeddingSharding `json:"embedding,omitempty"`
}

// Kind names a family of strategies, as --strategy spells it.
type Kind string

// The strategy families.
const (
	DataParallel   Kind = "dp"
	TensorParallel Kind = "tp"
	Grid           Kind = "grid"
	Pipeline       Kind = "pp"
)

// Kinds lists every family, in the order the comparison table prints them.
var Kinds = []Kind{DataParallel, TensorParallel, Grid, Pipeline, Embedding, Joint}

// ParseKind reads a --strategy value.
func ParseKind(s string) (Kind, error) {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		if string(k) == s {
			return k, nil
		}
		names[i] = string(k)
	}
	return "", fmt.Errorf("unknown strategy %q (known: %s)", s, strings.Join(names, ", "))
}

// Devices is the number of devices the strategy uses (fits checks that
// the product does not overflow).
func (s Strategy) Devices() int { return s.DP * s.TP * s.PP }

// fits checks that every degree is positive and that the strategy needs
// at most n devices, without overflowing on the way.
func (s Strategy) fits(n int) error {
	if s.DP < 1 || s.TP < 1 || s.PP < 1 || s.Microbatches < 1 {
		return fmt.Errorf("%s: every degree and the micro-batches must be at least 1: %w", s, checked.ErrRange)
	}
	if s.ZeRO < 0 || s.ZeRO > 3 {
		return fmt.Errorf("%s: ZeRO stage %d is not 0 to 3: %w", s, s.ZeRO, checked.ErrRange)
	}
	d, err := checked.Product(int64(s.DP), int64(s.TP), int64(s.PP))
	if err != nil || d > int64(n) {
		return fmt.Errorf("%s needs more devices than the machine's %d: %w", s, n, checked.ErrRange)
	}
	return nil
}

// taskBound refuses a strategy whose step, for ops operators, would have
// more than MaxTasks forward and backward tasks.
func (s Strategy) taskBound(ops int) error {
	tasks, err := checked.Product(int64(ops), int64(s.Microbatches), 2)
	if err != nil || tasks > MaxTasks {
		return fmt.Errorf("%d operators × %d micro-batches × forward and backward is more than the simulator's %d tasks: %w", ops, s.Microbatches, MaxTasks, checked.ErrRange)
	}
	return nil
}

func (s Strategy) String() string {
	if s.Embedding != "" {
		return fmt.Sprintf("%s %s", s.Kind, layoutText(s))
	}
	t := fmt.Sprintf("%s dp%d×tp%d", s.Kind, s.DP, s.TP)
	if s.PP > 1 {
		t += fmt.Sprintf("×pp%d (%d micro-batches)", s.PP, s.Microbatches)
	}
	return t + s.levers()
}

// candidates lists the strategies of one family on n devices with
// perNode devices per node. Tensor parallelism stays within a node where
// it can (Megatron's practice); the grid tries every factorisation.
func candidates(k Kind, n, perNode, microbatches int) []Strategy {
	one := func(dp, tp, pp int) Strategy {
		m := 1
		if pp > 1 {
			m = microbatches
			if m == 0 {
				m = 2 * pp
			}
		}
		return Strategy{Kind: k, DP: dp, TP: tp, PP: pp, Microbatches: m}
	}
	switch k {
	case DataParallel:
		return []Strategy{one(n, 1, 1)}
	case Embedding:
		return embeddingCandidates(n)
	case TensorParallel:
		// every tensor-parallel degree within a node; Choose keeps
		// the fastest (degrees that cut no product replicate instead)
		var out []Strategy
		for tp := 2; tp <= gcd(n, perNode); tp++ {
			if n%tp == 0 && perNode%tp == 0 {
				out = append(out, one(n/tp, tp, 1))
			}
		}
		if len(out) == 0 {
			out = append(out, one(n, 1, 1))
		}
		return out
	case Joint:
		// every data × tensor grid, pipelines of such grids with the
		// tensor groups inside a node, and the embedding placements: the
		// other families' spaces, each with its layouts searched
		var out []Strategy
		for tp := 1; tp <= n; tp++ {
			for pp := 1; n%tp == 0 && pp <= n/tp; pp++ {
				if (n/tp)%pp == 0 && (pp == 1 || perNode%tp == 0) {
					out = append(out, one(n/tp/pp, tp, pp))
				}
			}
		}
		for _, s := range embeddingCandidates(n) {
			s.Kind = Joint
			out = append(out, s)
		}
		return out
	case Grid:
		var out []Strategy
		for tp := 1; tp <= n; tp++ {
			if n%tp == 0 {
				out = append(out, one(n/tp, tp, 1))
			}
		}
		return out
	}
	var out []Strategy
	for pp := 2; pp <= n; pp++ {
		if n%pp == 0 {
			out = append(out, one(n/pp, 1, pp))
		}
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// best picks the fastest result that fits in memory, or else the one
// needing the least memory; ok is false when none fits.
func best(rs []*Result) (r *Result, ok bool) {
	var fit, small *Result
	for _, x := range rs {
		if x.Fits && (fit == nil || x.Time.Step < fit.Time.Step) {
			fit = x
		}
		if small == nil || x.Memory.Total() < small.Memory.Total() {
			small = x
		}
	}
	if fit != nil {
		return fit, true
	}
	return small, false
}

// divides reports whether the global batch splits evenly over the
// strategy's data-parallel replicas and micro-batches.
func (s Strategy) divides(batch int64) error {
	per, err := checked.Mul(int64(s.DP), int64(s.Microbatches))
	if err != nil || per <= 0 || batch%per != 0 {
		what := fmt.Sprintf("the data-parallel degree %d", s.DP)
		if s.Microbatches > 1 {
			what += fmt.Sprintf(" times %d micro-batches", s.Microbatches)
		}
		return fmt.Errorf("batch %d does not divide by %s", batch, what)
	}
	return nil
}
