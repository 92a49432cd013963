package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	goruntime "runtime"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"rulebook/optimizer"
	"rulebook/store"
)

// recorder keeps an optimize run in the database when there is one: the
// run with its settings, the operator costs measured on the way, and the
// optimization with the rules it applied (for 'rulebook usage').
type recorder struct {
	db     *store.Store
	runID  int64
	device string
	known  map[optimizer.OpKey]float64 // read from the database or measured
	// measured are the costs timed in this run, stored when it ends.
	measured map[optimizer.OpKey]float64
	repeat   int
	// warnings are told the user at the end: the result stands, but
	// something about it is worse than it should be.
	warnings []string
}

// openRecorder opens the database when the rules come from it, --db names
// one, or the default one exists; without one nothing is recorded and
// measured costs last for this run only.
func openRecorder(cmd *cobra.Command, model string, o optimizeOptions) (*recorder, error) {
	threads := o.threads
	if threads < 1 {
		threads = goruntime.GOMAXPROCS(0)
	}
	rec := &recorder{device: fmt.Sprintf("cpu/%d", threads), known: map[optimizer.OpKey]float64{},
		measured: map[optimizer.OpKey]float64{}, repeat: 5}
	path := dbPath(cmd)
	if isBundle(o.rules) && !cmd.Flag("db").Changed && os.Getenv("RULEBOOK_DB") == "" {
		if _, err := os.Stat(path); err != nil {
			return rec, nil
		}
	}
	db, err := store.Open(cmd.Context(), path)
	if err != nil {
		return nil, err
	}
	config, err := json.Marshal(map[string]any{"model": model, "rules": o.rules, "cost": o.cost, "alpha": o.opt.Alpha,
		"budget": o.opt.Budget, "timeout": o.opt.Timeout.String(), "memory_limit_mib": o.memoryMiB, "device": rec.device})
	if err == nil {
		rec.runID, err = db.BeginRun(cmd.Context(), "optimize", string(config), o.seed, version)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("record the run: %w", err)
	}
	rec.db = db
	return rec, nil
}

// measuredCosts is the measured cost model over the database's op_costs
// for this device; what it times on demand is stored when the run ends.
func (r *recorder) measuredCosts(ctx context.Context, threads int) *optimizer.Measured {
	return &optimizer.Measured{Repeat: r.repeat, Threads: threads, Ctx: ctx,
		Known: func(k optimizer.OpKey) (float64, bool) { return r.lookup(ctx, k) },
		Record: func(k optimizer.OpKey, ms float64) {
			r.known[k], r.measured[k] = ms, ms
		}}
}

// lookup finds a configuration's cost among those seen in this run, then
// in the database; a database error is told at the end and the
// configuration is timed again.
func (r *recorder) lookup(ctx context.Context, k optimizer.OpKey) (float64, bool) {
	if ms, ok := r.known[k]; ok {
		return ms, true
	}
	if r.db == nil {
		return 0, false
	}
	c, ok, err := r.db.Cost(ctx, r.device, k.Operator, k.Shapes, k.Params)
	if err != nil {
		r.warn1(fmt.Sprintf("reading operator costs: %v (timed again instead)", err))
	}
	if err != nil || !ok {
		return 0, false
	}
	ms := float64(c.Median) / float64(time.Millisecond)
	r.known[k] = ms
	return ms, true
}

// warn1 keeps a warning once.
func (r *recorder) warn1(w string) {
	if !slices.Contains(r.warnings, w) {
		r.warnings = append(r.warnings, w)
	}
}

// record stores the optimization in the run.
func (r *recorder) record(ctx context.Context, model string, o optimizeOptions, rs *optimizer.RuleSet, res *optimizer.Result) error {
	if r.db == nil {
		return nil
	}
	opt := store.Optimization{RunID: r.runID, Model: model, VersionTag: rs.Version, VersionHash: rs.Hash, CostModel: o.cost,
		Before: res.Before, After: res.After, Explored: res.Explored, Seen: res.Seen, Seconds: res.Elapsed.Seconds(), Stopped: res.Stopped}
	for _, a := range appliedRules(rs, res) {
		opt.Uses = append(opt.Uses, store.RuleUse{Rule: a.Rule, Count: a.Count})
	}
	_, err := r.db.RecordOptimization(ctx, opt)
	return err
}

// opCosts are the costs timed in this run, in key order.
func (r *recorder) opCosts() []store.OpCost {
	keys := slices.SortedFunc(maps.Keys(r.measured), func(a, b optimizer.OpKey) int {
		return cmp.Or(cmp.Compare(a.Operator, b.Operator), cmp.Compare(a.Shapes, b.Shapes), cmp.Compare(a.Params, b.Params))
	})
	costs := make([]store.OpCost, len(keys))
	for i, k := range keys {
		costs[i] = store.OpCost{Device: r.device, Operator: k.Operator, Shapes: k.Shapes, Params: k.Params,
			Median: time.Duration(r.measured[k] * float64(time.Millisecond)), Repeats: r.repeat, RunID: r.runID, MeasuredAt: time.Now()}
	}
	return costs
}

// finish stores the costs timed in this run, which hold whether or not
// the run succeeded, ends the run as err says and returns err.
func (r *recorder) finish(ctx context.Context, err error) error {
	if r.db == nil {
		return err
	}
	if len(r.measured) > 0 {
		if cerr := r.db.RecordCosts(context.WithoutCancel(ctx), r.opCosts()); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}
	return finishRun(ctx, r.db, store.Run{ID: r.runID, Status: store.RunDone, Stored: 1}, err)
}

// warn tells the warnings gathered on the way.
func (r *recorder) warn(w io.Writer) {
	for _, msg := range r.warnings {
		fmt.Fprintf(w, "warning: %s\n", msg)
	}
}

func (r *recorder) close() {
	if r.db != nil {
		r.db.Close()
	}
}
