package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"rulebook/optimizer"
	"rulebook/runtime"
	"rulebook/store"
)

// recorder keeps an optimize run in the database when there is one: the
// run with its settings, the operator costs measured on the way, and the
// optimization with the rules it applied (for 'rulebook usage').
type recorder struct {
	db     *store.Store
	runID  int64
	device string
	costs  *optimizer.CostCache
	// warnings are told the user at the end: the result stands, but
	// something about it is worse than it should be.
	warnings []string
}

// openRecorder opens the database when the rules come from it, --db names
// one, or the default one exists; without one nothing is recorded and
// measured costs last for this run only.
func openRecorder(cmd *cobra.Command, model string, o optimizeOptions) (*recorder, error) {
	rec := &recorder{device: runtime.CPUDevice(o.threads)}
	path := dbPath(cmd)
	if isBundle(o.rules) && !cmd.Flag("db").Changed && os.Getenv("RULEBOOK_DB") == "" {
		if _, err := os.Stat(path); err != nil {
			rec.costs = optimizer.NewCostCache(nil, rec.device, 0)
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
	rec.db, rec.costs = db, optimizer.NewCostCache(db, rec.device, rec.runID)
	return rec, nil
}

// record stores the optimization in the run.
func (r *recorder) record(ctx context.Context, rep *optimizer.Report) error {
	if r.db == nil {
		return nil
	}
	_, err := r.db.RecordOptimization(ctx, rep.Optimization(r.runID))
	return err
}

// finish stores the costs timed in this run, which hold whether or not
// the run succeeded, ends the run as err says and returns err.
func (r *recorder) finish(ctx context.Context, err error) error {
	if r.db == nil {
		return err
	}
	if cerr := r.costs.Save(ctx); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return r.db.EndRun(ctx, store.Run{ID: r.runID, Status: store.RunDone, Stored: 1}, err)
}

// warn tells the warnings gathered on the way.
func (r *recorder) warn(w io.Writer) {
	for _, msg := range append(r.costs.Warnings(), r.warnings...) {
		fmt.Fprintf(w, "warning: %s\n", msg)
	}
}

func (r *recorder) close() {
	if r.db != nil {
		r.db.Close()
	}
}
