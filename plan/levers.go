package plan

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"rulebook/cluster"
	"slices"

	"rulebook/simulate"
	"rulebook/training"
)

// The memory levers users pull when a plan does not fit, each priced in
// time and memory (docs/planner.md, "Memory levers"):
//
//   - ZeRO 1–3 (Strategy.ZeRO) shards Adam's state, then the gradients,
//     then the weights over the data-parallel group. Stages 1 and 2
//     reduce-scatter the gradients and all-gather the updated weights
//     after the optimizer step; stage 3 all-gathers each operator's
//     weights before its forward and again before its backward.
//   - Recomputation (Strategy.Recompute) keeps only each block's inputs
//     and runs the block's forward again in the backward pass.
//   - Gradient accumulation (Microbatches with one stage) runs k passes
//     of a k-th of the batch: activations shrink k-fold, compute stays
//     about the same, and the gradients are reduced once.

// levers is the layout label's suffix naming the levers in use:
// "+zero2", "+recompute", "+accum4".
func (s Strategy) levers() string {
	t := ""
	if s.ZeRO > 0 {
		t += fmt.Sprintf("+zero%d", s.ZeRO)
	}
	if s.Recompute {
		t += "+recompute"
	}
	if s.PP == 1 && s.Microbatches > 1 {
		t += fmt.Sprintf("+accum%d", s.Microbatches)
	}
	return t
}

// leverNames describes the levers in use, for the table and plan.json;
// none for a strategy without levers.
func (s Strategy) leverNames() []string {
	var out []string
	switch s.ZeRO {
	case 1:
		out = append(out, fmt.Sprintf("ZeRO-1: Adam's state sharded over the %d data-parallel replicas", s.DP))
	case 2:
		out = append(out, fmt.Sprintf("ZeRO-2: Adam's state and the gradients sharded over the %d data-parallel replicas", s.DP))
	case 3:
		out = append(out, fmt.Sprintf("ZeRO-3 (FSDP): Adam's state, gradients and weights sharded over the %d data-parallel replicas", s.DP))
	}
	if s.Recompute {
		out = append(out, "recomputation: each block keeps its inputs and runs its forward again in backward")
	}
	if s.PP == 1 && s.Microbatches > 1 {
		out = append(out, fmt.Sprintf("gradient accumulation over %d steps", s.Microbatches))
	}
	return out
}

// leverTiers are the ZeRO stages and recomputation tried on a strategy
// that does not fit, each with the least gradient accumulation that makes
// it fit, cheapest in time first: accumulation and ZeRO 1 and 2 move
// about the bytes an all-reduce moves; ZeRO-3 gathers every weight twice
// more; recomputation runs the forward pass again. A later tier is tried
// only when no set of an earlier one fits.
func leverTiers(s Strategy) [][]Strategy {
	set := func(zero int, recompute bool) Strategy {
		v := s
		v.ZeRO, v.Recompute = zero, recompute
		return v
	}
	if s.DP < 2 || s.Embedding != "" {
		// ZeRO would shard the tables' state a second time
		return [][]Strategy{{set(0, false)}, {set(0, true)}}
	}
	return [][]Strategy{
		{set(0, false), set(1, false), set(2, false)},
		{set(3, false)},
		{set(0, true), set(1, true), set(2, true), set(3, true)},
	}
}

// maxAccumulation bounds the accumulation steps tried: past it the batch
// is one the user should make smaller, and each step is simulated.
const maxAccumulation = 64

// accumulations are v with 1, 2, 4, … accumulation steps, as far as the
// batch per replica divides, up to maxAccumulation; a pipeline already accumulates over its
// micro-batches and is tried as it is.
func accumulations(v Strategy, batch int64) []Strategy {
	if v.PP > 1 {
		return []Strategy{v}
	}
	var out []Strategy
	for k := int64(1); k <= min(batch/int64(v.DP), maxAccumulation); k *= 2 {
		if batch%(int64(v.DP)*k) != 0 {
			break
		}
		a := v
		a.Microbatches = int(k)
		out = append(out, a)
	}
	return out
}

// relieveAll tries the levers on the strategies that do not fit, fastest
// first, replacing each with the fastest lever set that fits. A lever
// never makes a step faster, so a strategy already slower without levers
// than one that fits is not tried; one strategy listed by two families
// (tp and grid) is relieved once.
func relieveAll(ctx context.Context, g *training.Graph, families [][]*Result, o Options) error {
	type at struct{ f, i int }
	var tight []at
	bound := math.Inf(1)
	for f, rs := range families {
		for i, r := range rs {
			switch {
			case r.Err != nil:
			case r.Fits:
				bound = min(bound, r.Time.Step)
			default:
				tight = append(tight, at{f, i})
			}
		}
	}
	slices.SortStableFunc(tight, func(a, b at) int {
		return cmp.Compare(families[a.f][a.i].Time.Step, families[b.f][b.i].Time.Step)
	})
	done := map[Strategy]*Result{}
	for _, t := range tight {
		r := families[t.f][t.i]
		if r.Time.Step >= bound {
			break
		}
		key := r.Strategy
		key.Kind = ""
		relieved, seen := done[key]
		if !seen {
			var err error
			if relieved, err = relieve(ctx, g, r, o); err != nil {
				return err
			}
			done[key] = relieved
		}
		if relieved == nil {
			continue
		}
		cp := *relieved
		cp.Strategy.Kind = r.Strategy.Kind
		families[t.f][t.i] = &cp
		bound = min(bound, cp.Time.Step)
	}
	return nil
}

// relieve prices the levers on r's strategy, which does not fit: tier by
// tier, for each lever set the least accumulation that fits, simulated.
// It returns the fastest that fits in the first tier where any does, or
// nil when none does.
func relieve(ctx context.Context, g *training.Graph, r *Result, o Options) (*Result, error) {
	for _, tier := range leverTiers(r.Strategy) {
		var fit []*Result
		for _, set := range tier {
			if !o.Levers.allows(set) {
				continue
			}
			p, err := leastAccumulation(g, set, r.Strategy, o)
			if err != nil {
				return nil, err
			}
			if p == nil {
				continue
			}
			if err := simulateStep(ctx, g, p, o); err != nil {
				return nil, err
			}
			if p.Err == nil {
				fit = append(fit, p)
			}
		}
		if len(fit) > 0 {
			best, _ := best(fit)
			return best, nil
		}
	}
	return nil, nil
}

// leastAccumulation is set with the fewest accumulation steps that fit,
// laid out but not simulated; nil when none fits. The strategy without
// levers (was) is skipped.
func leastAccumulation(g *training.Graph, set, was Strategy, o Options) (*Result, error) {
	for _, v := range accumulations(set, g.Batch) {
		if v == was || !o.Levers.allows(v) {
			continue
		}
		p, err := prepare(g, v, o)
		if err != nil {
			return nil, err
		}
		if p.Err == nil && p.Fits {
			return p, nil
		}
	}
	return nil, nil
}

// gatherWeights adds, under ZeRO-3, the all-gather of op i's weight
// shards before one of its passes (named by when) and returns its key;
// "" when there is none. Nothing waits for it to start: FSDP prefetches.
func (b *builder) gatherWeights(st, i int, when string) string {
	op := b.g.Ops[i]
	if b.s.ZeRO < 3 || b.s.DP < 2 || op.ParamBytes == 0 {
		return ""
	}
	key := fmt.Sprintf("gather weights %s %s", op.Name, when)
	bytes := op.ParamBytes * b.r.Layouts[i].cut(b.s.TP)
	res, t := b.collective(st, b.dp[st], func(p cluster.Placement) float64 { return b.o.Machine.AllGatherAt(p, bytes) })
	b.add(key, "all-gather weights "+op.Name, simulate.Communication, res, t)
	return key
}

// recompute is the time op i's forward takes again before its backward
// when its block is recomputed, on the device and on the host.
func (b *builder) recompute(i int) (device, launch float64) {
	if !b.s.Recompute || b.r.block[i] < 0 {
		return 0, 0
	}
	return b.r.Costs[i].Forward, b.r.Costs[i].Launch
}
