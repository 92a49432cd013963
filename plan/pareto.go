package plan

import (
	"cmp"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"text/tabwriter"

	"rulebook/training"
)

// The time/memory frontier (TensorOpt, ../shared/seeds/002_…, Alg. 1–3):
// every strategy of every family, with every set of memory levers, priced
// in simulated step time and memory per device; the frontier keeps the
// plans that no other plan beats in both. Plans that need more memory
// than the device has are left out: they cannot run at all.

// Point is one plan on the frontier.
type Point struct {
	Strategy Strategy `json:"strategy"`
	Layout   string   `json:"layout"`
	// Step is the simulated step, in seconds; Memory the fullest device's
	// memory, in bytes.
	Step   float64 `json:"step_s"`
	Memory float64 `json:"memory_bytes"`
	// Fits is whether Memory is within the memory limit (--memory-limit,
	// or the device's capacity).
	Fits bool `json:"fits"`
}

// Frontier prices the strategies of kinds with every lever set and
// returns the frontier, least memory first. A lever saves at most the
// optimizer step (ZeRO shards it over the replicas) and adds work
// everywhere else, so a lever set is simulated only where its strategy's
// step without levers, less that step, does not already lose to a plan
// needing no more memory.
func Frontier(ctx context.Context, g *training.Graph, kinds []Kind, o Options) ([]Point, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	g = o.graph(g)
	variants, err := leverVariants(g, kinds, o)
	if err != nil {
		return nil, err
	}
	var priced []Point
	for _, v := range variants {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if dominated(priced, v.bound, v.r.Memory.Total()) {
			continue
		}
		if err := simulateStep(ctx, g, v.r, o); err != nil {
			return nil, err
		}
		if v.r.Err != nil {
			continue
		}
		for _, w := range v.same {
			// ZeRO shards the optimizer step, so a lever can save at most
			// that step; it adds work everywhere else
			w.bound = v.r.Time.Step - v.r.Optimizer.Forward
		}
		priced = append(priced, Point{Strategy: v.r.Strategy, Layout: layoutText(v.r.Strategy), Step: v.r.Time.Step, Memory: v.r.Memory.Total(), Fits: v.r.Fits})
	}
	return pareto(priced), nil
}

// variant is one strategy with one lever set, laid out and counted but not
// simulated. bound is the least step it can take: its strategy's without
// levers less its optimizer step, once that is simulated; same are the lever sets of a strategy
// without levers, whose bound its step sets.
type variant struct {
	r     *Result
	bound float64
	base  bool
	same  []*variant
}

// leverVariants lays out every candidate of kinds with every lever set
// and accumulation, each strategy once (tp and grid share some), and
// sorts them by memory. A strategy without levers comes before its lever
// sets, which it bounds.
func leverVariants(g *training.Graph, kinds []Kind, o Options) ([]*variant, error) {
	seen := map[Strategy]bool{}
	var out []*variant
	for _, k := range kinds {
		if k == Embedding && len(lookups(g)) == 0 || k == Joint && !o.Substitutions.searchable() {
			continue
		}
		for _, s := range candidates(k, o.Machine.NumDevices(), o.Machine.DevicesPerNode, o.Microbatches) {
			if s.Embedding != "" && len(lookups(g)) == 0 {
				continue
			}
			base := &variant{base: true}
			for _, set := range slices.Concat(leverTiers(s)...) {
				for _, a := range accumulations(set, g.Batch) {
					key := a
					key.Kind = ""
					if seen[key] || !o.Levers.allows(a) {
						continue
					}
					seen[key] = true
					r, err := prepare(g, a, o)
					if err != nil {
						return nil, err
					}
					if r.Err != nil || r.Memory.Total() > o.Machine.Device.MemoryBytes {
						continue
					}
					v := &variant{r: r}
					if a == s {
						base.r = r
						out = append(out, base)
						continue
					}
					base.same = append(base.same, v)
					out = append(out, v)
				}
			}
		}
	}
	// strategies without levers first, so they bound their lever sets;
	// then least memory first, so a plan is checked against those needing
	// no more memory
	slices.SortStableFunc(out, func(a, b *variant) int {
		return cmp.Or(-cmpBool(a.base, b.base), cmp.Compare(a.r.Memory.Total(), b.r.Memory.Total()))
	})
	return out, nil
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// dominated reports whether a priced plan needs no more memory than mem
// and is no slower than bound.
func dominated(priced []Point, bound, mem float64) bool {
	if bound <= 0 {
		return false
	}
	for _, p := range priced {
		if p.Memory <= mem && p.Step <= bound {
			return true
		}
	}
	return false
}

// pareto keeps the points no other point beats in both step and memory,
// least memory first.
func pareto(ps []Point) []Point {
	slices.SortStableFunc(ps, func(a, b Point) int {
		return cmp.Or(cmp.Compare(a.Memory, b.Memory), cmp.Compare(a.Step, b.Step))
	})
	var out []Point
	fastest := math.Inf(1)
	for _, p := range ps {
		if p.Step < fastest {
			out = append(out, p)
			fastest = p.Step
		}
	}
	return out
}

// WriteFrontier prints the frontier as a table.
func WriteFrontier(w io.Writer, ps []Point, costModel string) error {
	fmt.Fprintf(w, "time/memory frontier: %d plans, none both faster and smaller than another (%s; cost model: %s)\n", len(ps), Simulated, costModel)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tlayout\tstep (simulated)\tmemory/device\tfits\t")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", p.Strategy.Kind, p.Layout, ms(p.Step), gib(p.Memory), yesNo(p.Fits))
	}
	return tw.Flush()
}

// WriteFrontierCSV writes the frontier as CSV, one plan per row.
func WriteFrontierCSV(w io.Writer, ps []Point) error {
	cw := csv.NewWriter(w)
	rows := [][]string{{"strategy", "layout", "step_ms_simulated", "memory_gib", "fits"}}
	for _, p := range ps {
		rows = append(rows, []string{string(p.Strategy.Kind), p.Layout, strconv.FormatFloat(p.Step*1e3, 'f', 4, 64),
			strconv.FormatFloat(p.Memory/(1<<30), 'f', 4, 64), strconv.FormatBool(p.Fits)})
	}
	return cw.WriteAll(rows)
}
