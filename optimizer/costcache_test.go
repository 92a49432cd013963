package optimizer

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"rulebook/store"
)

// The store satisfies CostStore as it is: no adapter in between.
var _ CostStore = (*store.Store)(nil)

// TestCostCache reads costs from the store once, remembers those timed
// in the run, and saves only those, under the run's device and id.
func TestCostCache(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	run, err := db.BeginRun(ctx, "optimize", "{}", 0, "test")
	if err != nil {
		t.Fatal(err)
	}
	stored := OpKey{Operator: "Relu", Shapes: "1x4 -> 1x4"}
	if err := db.RecordCosts(ctx, []store.OpCost{{Device: "cpu/2", Operator: stored.Operator, Shapes: stored.Shapes,
		Median: 3 * time.Millisecond, Repeats: 5, RunID: run, MeasuredAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	c := NewCostCache(db, "cpu/2", run)
	if ms, ok := c.Lookup(ctx, stored); !ok || ms != 3 {
		t.Errorf("a stored cost: %g ms, %v", ms, ok)
	}
	timed := OpKey{Operator: "Conv", Shapes: "1x3x8x8,4x3x3x3 -> 1x4x6x6", Params: "group=1"}
	if _, ok := c.Lookup(ctx, timed); ok {
		t.Error("a cost never measured was found")
	}
	c.Remember(timed, 1.5)
	if ms, ok := c.Lookup(ctx, timed); !ok || ms != 1.5 || c.Timed() != 1 {
		t.Errorf("a cost timed in the run: %g ms, %v, %d timed", ms, ok, c.Timed())
	}
	if err := c.Save(ctx); err != nil {
		t.Fatal(err)
	}
	costs, err := db.Costs(ctx, "cpu/2")
	if err != nil || len(costs) != 2 {
		t.Fatalf("costs after Save: %+v, %v", costs, err)
	}
	if got := costs[0]; got.Operator != "Conv" || got.Median != 1500*time.Microsecond || got.RunID != run || got.Repeats != measureRepeat {
		t.Errorf("saved %+v", got)
	}
}

// A store that fails is a warning, told once, and the cost is timed.
func TestCostCacheStoreError(t *testing.T) {
	c := NewCostCache(failingStore{}, "cpu/1", 0)
	for range 3 {
		if _, ok := c.Lookup(context.Background(), OpKey{Operator: "Relu"}); ok {
			t.Error("found a cost in a failing store")
		}
	}
	if w := c.Warnings(); len(w) != 1 {
		t.Errorf("warnings %q, want one", w)
	}
	if err := NewCostCache(nil, "cpu/1", 0).Save(context.Background()); err != nil {
		t.Errorf("saving without a store: %v", err)
	}
}

type failingStore struct{}

func (failingStore) Cost(context.Context, string, string, string, string) (store.OpCost, bool, error) {
	return store.OpCost{}, false, errors.New("disk on fire")
}

func (failingStore) RecordCosts(context.Context, []store.OpCost) error {
	return errors.New("disk on fire")
}
