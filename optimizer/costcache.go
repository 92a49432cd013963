package optimizer

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"rulebook/store"
	"rulebook/timing"
)

// CostStore keeps measured operator costs from one run to the next, by
// device and operator configuration; *store.Store is one.
type CostStore interface {
	Cost(ctx context.Context, device, operator, shapes, params string) (c store.OpCost, ok bool, err error)
	RecordCosts(ctx context.Context, costs []store.OpCost) error
}

// measureRepeat is how many timed runs make a configuration's measured
// cost (their median).
const measureRepeat = 5

// CostCache is the memory of the measured cost model for one run: the
// costs known so far, read from a CostStore or timed in this run, and the
// ones timed, which Save stores for the next run.
type CostCache struct {
	store  CostStore // nil: costs last for this run only
	device string
	runID  int64
	known  map[OpKey]float64
	timed  map[OpKey]float64
	// warnings are for the user: the result stands, but something about
	// it is worse than it should be.
	warnings []string
}

// NewCostCache caches costs on device (e.g. "cpu/2", see
// runtime.CPUDevice, or "cuda/NVIDIA H200", see runtime.CUDADevice) over st, which may be nil; what it saves is
// recorded as measured by run runID.
func NewCostCache(st CostStore, device string, runID int64) *CostCache {
	return &CostCache{store: st, device: device, runID: runID, known: map[OpKey]float64{}, timed: map[OpKey]float64{}}
}

// Measured is the measured cost model over the cache: what it times on
// demand on backend (runtime.BackendCPU with threads CPU threads, or
// runtime.BackendCUDA, the cache's device being that GPU's) is remembered
// and saved.
func (c *CostCache) Measured(ctx context.Context, backend string, threads int) *Measured {
	return &Measured{Repeat: measureRepeat, Threads: threads, Backend: backend, Ctx: ctx,
		Known:  func(k OpKey) (float64, bool) { return c.Lookup(ctx, k) },
		Record: c.Remember}
}

// Lookup finds a configuration's cost among those seen in this run, then
// in the store; a store error becomes a warning, and the configuration
// is timed again.
func (c *CostCache) Lookup(ctx context.Context, k OpKey) (float64, bool) {
	if ms, ok := c.known[k]; ok {
		return ms, true
	}
	if c.store == nil {
		return 0, false
	}
	stored, ok, err := c.store.Cost(ctx, c.device, k.Operator, k.Shapes, k.Params)
	if err != nil {
		c.warnOnce(fmt.Sprintf("reading operator costs: %v (timed again instead)", err))
	}
	if err != nil || !ok {
		return 0, false
	}
	ms := timing.Milliseconds(stored.Median)
	c.known[k] = ms
	return ms, true
}

// Remember keeps a configuration's cost, timed in this run.
func (c *CostCache) Remember(k OpKey, ms float64) {
	c.known[k], c.timed[k] = ms, ms
}

// Timed is how many configurations were timed in this run.
func (c *CostCache) Timed() int { return len(c.timed) }

// Warnings are the problems met on the way, each once.
func (c *CostCache) Warnings() []string { return c.warnings }

func (c *CostCache) warnOnce(w string) {
	if !slices.Contains(c.warnings, w) {
		c.warnings = append(c.warnings, w)
	}
}

// Save stores the costs timed in this run. They hold whether or not the
// run succeeded, so Save goes on after ctx is cancelled.
func (c *CostCache) Save(ctx context.Context) error {
	if c.store == nil || len(c.timed) == 0 {
		return nil
	}
	return c.store.RecordCosts(context.WithoutCancel(ctx), c.opCosts())
}

// opCosts are the costs timed in this run, in key order.
func (c *CostCache) opCosts() []store.OpCost {
	keys := slices.SortedFunc(maps.Keys(c.timed), func(a, b OpKey) int {
		return cmp.Or(cmp.Compare(a.Operator, b.Operator), cmp.Compare(a.Shapes, b.Shapes), cmp.Compare(a.Params, b.Params))
	})
	costs := make([]store.OpCost, len(keys))
	for i, k := range keys {
		costs[i] = store.OpCost{Device: c.device, Operator: k.Operator, Shapes: k.Shapes, Params: k.Params,
			Median: timing.FromMilliseconds(c.timed[k]), Repeats: measureRepeat, RunID: c.runID, MeasuredAt: time.Now()}
	}
	return costs
}
