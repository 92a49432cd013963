package optimizer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"rulebook/internal/progress"
	"rulebook/runtime"
	"rulebook/store"
)

// Recording keeps an optimize run in the store: the run with its
// settings, the operator costs measured on the way (Costs), and the
// optimization with the rules it applied, for 'rulebook usage'. Without a
// store nothing is recorded, and measured costs last for the run only.
type Recording struct {
	db     *store.Store
	RunID  int64
	Device string // the device costs are for: measured on, or modelled (see CostDevice)
	Costs  *CostCache
}

// BeginRecording starts an "optimize" run of db, which may be nil, with
// its settings, seed and toolVersion; costs are for device (CostDevice).
func BeginRecording(ctx context.Context, db *store.Store, device string, settings map[string]any, seed uint64, toolVersion string) (*Recording, error) {
	if db == nil {
		return &Recording{Device: device, Costs: NewCostCache(nil, device, 0)}, nil
	}
	config, err := json.Marshal(settings)
	if err != nil {
		return nil, fmt.Errorf("record the run: %w", err)
	}
	runID, err := db.BeginRun(ctx, "optimize", string(config), seed, toolVersion)
	if err != nil {
		return nil, fmt.Errorf("record the run: %w", err)
	}
	return &Recording{db: db, RunID: runID, Device: device, Costs: NewCostCache(db, device, runID)}, nil
}

// OpenRecording opens the store at path and begins the run there. When
// optional, a store that does not exist is not created and nothing is
// recorded. The caller calls Close.
func OpenRecording(ctx context.Context, path string, optional bool, device string, settings map[string]any, seed uint64, toolVersion string) (*Recording, error) {
	if _, err := os.Stat(path); optional && err != nil {
		return BeginRecording(ctx, nil, device, nil, 0, toolVersion)
	}
	db, err := store.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	rec, err := BeginRecording(ctx, db, device, settings, seed, toolVersion)
	if err != nil {
		db.Close()
		return nil, err
	}
	return rec, nil
}

// Close closes the store the run is recorded in, if any.
func (r *Recording) Close() {
	if r.db != nil {
		r.db.Close()
	}
}

// Recorded says whether the run is kept in a store.
func (r *Recording) Recorded() bool { return r.db != nil }

// Finish records rep when a model was written (rep is not nil: the
// optimization succeeded, or was interrupted after writing the best graph
// found so far), stores the costs timed in the run, which hold either
// way, ends the run as err says and returns err, or the first error of
// recording. These few writes go ahead after an interruption.
func (r *Recording) Finish(ctx context.Context, rep *Report, err error) error {
	if r.db == nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	if rep != nil {
		if _, rerr := r.db.RecordOptimization(ctx, rep.Optimization(r.RunID)); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	if cerr := r.Costs.Save(ctx); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return r.db.EndRun(ctx, store.Run{ID: r.RunID, Status: store.RunDone, Stored: 1}, err)
}

// BenchOps times each distinct operator configuration of m alone on e,
// the median of repeat runs, as a "bench-ops" run of db, and stores the
// costs for e's device, replacing those measured before. model names the
// model in the run's settings; report hears of each configuration.
func BenchOps(ctx context.Context, db *store.Store, m *runtime.Model, e runtime.Executor, model string, repeat int, seed uint64,
	toolVersion string, report progress.Func) (runID int64, costs []store.OpCost, err error) {
	configs := runtime.DistinctConfigs(m.Nodes())
	config, err := json.Marshal(map[string]any{"model": model, "device": e.DeviceKey(), "repeat": repeat, "configurations": len(configs)})
	if err == nil {
		runID, err = db.BeginRun(ctx, "bench-ops", string(config), seed, toolVersion)
	}
	if err != nil {
		return 0, nil, err
	}
	times, err := runtime.TimeConfigs(ctx, e, configs, repeat, report)
	if err != nil {
		return 0, nil, db.EndRun(ctx, store.Run{ID: runID}, fmt.Errorf("bench-ops: %w", err))
	}
	costs = make([]store.OpCost, len(configs))
	for i, n := range configs {
		costs[i] = store.OpCost{Device: e.DeviceKey(), Operator: n.Op, Shapes: n.ShapeKey(), Params: n.Params,
			Median: times[i], Repeats: repeat, RunID: runID, MeasuredAt: time.Now()}
	}
	run := store.Run{ID: runID, Status: store.RunDone, Candidates: int64(len(configs)), Stored: int64(len(costs))}
	return runID, costs, db.EndRun(ctx, run, db.RecordCosts(ctx, costs))
}
