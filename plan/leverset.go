package plan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"rulebook/training"
)

// LeverSet is the memory levers a search may pull (--levers): the zero
// value allows every one; NoLevers none.
type LeverSet uint8

// The lever families, as --levers names them.
const (
	Accumulation LeverSet = 1 << iota
	ZeRO
	Recompute
	// NoLevers allows none: a strategy that does not fit stays unfit.
	NoLevers
)

// leverFamilies are the families in the order the table lists them.
var leverFamilies = []struct {
	set        LeverSet
	flag, name string
}{
	{Accumulation, "accum", "gradient accumulation"},
	{ZeRO, "zero", "ZeRO 1-3"},
	{Recompute, "recompute", "recomputation"},
}

// ErrUnknownLever is a --levers value naming no lever family.
var ErrUnknownLever = errors.New("unknown memory lever")

// ParseLevers reads --levers: a comma-separated list of accum, zero and
// recompute, or all ("" too) or none.
func ParseLevers(s string) (LeverSet, error) {
	switch s {
	case "", "all":
		return 0, nil
	case "none":
		return NoLevers, nil
	}
	var set LeverSet
next:
	for _, part := range strings.Split(s, ",") {
		for _, f := range leverFamilies {
			if part == f.flag {
				set |= f.set
				continue next
			}
		}
		return 0, fmt.Errorf("%w %q (known: accum, zero, recompute, comma-separated; or all, none)", ErrUnknownLever, part)
	}
	return set, nil
}

// allows reports whether every lever of strategy s is in the set.
func (l LeverSet) allows(s Strategy) bool {
	has := func(f LeverSet) bool { return l == 0 || l&f != 0 }
	return (s.ZeRO == 0 || has(ZeRO)) && (!s.Recompute || has(Recompute)) && (s.PP > 1 || s.Microbatches <= 1 || has(Accumulation))
}

// LeverOption is, for the chosen strategy, the fastest plan that fits
// with one lever family alone, or why none does.
type LeverOption struct {
	Family string  `json:"family"`
	Result *Result `json:"-"`
	// Layout, Time and Memory are the plan's; empty when none fits.
	Layout string  `json:"layout,omitempty"`
	Time   *Time   `json:"time,omitempty"`
	Memory *Memory `json:"memory_per_device,omitempty"`
	Why    string  `json:"why_not,omitempty"`
}

// withoutLevers is s with no lever: no ZeRO, no recomputation, and no
// accumulation outside a pipeline.
func withoutLevers(s Strategy) Strategy {
	s.ZeRO, s.Recompute = 0, false
	if s.PP == 1 {
		s.Microbatches = 1
	}
	return s
}

// leverOptions prices each allowed lever family alone on the chosen
// strategy, when it needed a lever: the fastest set of the family that
// fits (the fewest accumulation steps; any ZeRO stage; recomputation),
// simulated, or why none fits.
func leverOptions(ctx context.Context, g *training.Graph, chosen Strategy, o Options) ([]LeverOption, error) {
	base := withoutLevers(chosen)
	if base == chosen {
		return nil, nil
	}
	var out []LeverOption
	for _, f := range leverFamilies {
		if o.Levers != 0 && o.Levers&f.set == 0 {
			continue
		}
		opt, err := leverOption(ctx, g, base, f.set, o)
		if err != nil {
			return nil, err
		}
		opt.Family = f.name
		out = append(out, opt)
	}
	return out, nil
}

// familySets are the lever sets of one family on base.
func familySets(base Strategy, family LeverSet, batch int64) ([]Strategy, string) {
	var sets []Strategy
	switch family {
	case Accumulation:
		if base.PP > 1 {
			return nil, "a pipeline accumulates over its micro-batches already"
		}
		if all := accumulations(base, batch); len(all) > 1 {
			sets = all[1:]
		}
	case ZeRO:
		if base.DP < 2 || base.Embedding != "" {
			return nil, "ZeRO needs more than one data-parallel replica and no embedding tables"
		}
		for z := 1; z <= 3; z++ {
			v := base
			v.ZeRO = z
			sets = append(sets, v)
		}
	case Recompute:
		v := base
		v.Recompute = true
		sets = append(sets, v)
	}
	return sets, ""
}

// leverOption is the fastest set of one family that fits, simulated.
func leverOption(ctx context.Context, g *training.Graph, base Strategy, family LeverSet, o Options) (LeverOption, error) {
	sets, why := familySets(base, family, g.Batch)
	if why != "" {
		return LeverOption{Why: why}, nil
	}
	var fit []*Result
	var least *Result
	for _, v := range sets {
		p, err := prepare(g, v, o)
		if err != nil {
			return LeverOption{}, err
		}
		if p.Err != nil {
			continue
		}
		if !p.Fits {
			if least == nil || p.Memory.Total() < least.Memory.Total() {
				least = p
			}
			continue
		}
		if err := simulateStep(ctx, g, p, o); err != nil {
			return LeverOption{}, err
		}
		if p.Err == nil {
			fit = append(fit, p)
		}
	}
	if len(fit) == 0 {
		if least == nil {
			return LeverOption{Why: fmt.Sprintf("the batch %d does not divide for it", g.Batch)}, nil
		}
		return LeverOption{Why: fmt.Sprintf("does not fit: %s needs %s, at least", layoutText(least.Strategy), gib(least.Memory.Total()))}, nil
	}
	r, _ := best(fit)
	r.Strategy.Kind = base.Kind
	return LeverOption{Result: r, Layout: layoutText(r.Strategy), Time: &r.Time, Memory: &r.Memory}, nil
}

// writeLeverOptions prints, under the table, each lever family's best
// plan for the chosen strategy.
func (c *Choice) writeLeverOptions(w io.Writer) error {
	if len(c.LeverOptions) == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(w, "each lever alone on %s (simulated):\n", layoutText(withoutLevers(c.Chosen.Strategy))); err != nil {
		return err
	}
	for _, l := range c.LeverOptions {
		line := fmt.Sprintf("  %s: %s", l.Family, l.Why)
		if l.Result != nil {
			line = fmt.Sprintf("  %s: %s, %s per step, %s per device", l.Family, l.Layout, ms(l.Time.Step), gib(l.Memory.Total()))
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}
