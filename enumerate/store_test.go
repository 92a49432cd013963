package enumerate_test

import (
	"context"
	"path/filepath"
	"testing"

	"rulebook/enumerate"
	"rulebook/internal/progress"
	"rulebook/rules"
	"rulebook/store"
)

// GenerateInto records its run and stores each candidate once: a second
// generation of the same rules adds none.
func TestGenerateInto(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg, err := rules.Default().Select([]string{"matmul", "transpose"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := enumerate.Config{Registry: reg, Pool: rules.DefaultPool(), MaxOps: 2, Seed: 1, Workers: 2}
	first, err := enumerate.GenerateInto(ctx, db, cfg, "test")
	if err != nil {
		t.Fatal(err)
	}
	if first.New == 0 || first.New != int64(len(first.Candidates)) {
		t.Errorf("first generation stored %d of %d candidates", first.New, len(first.Candidates))
	}
	again, err := enumerate.GenerateInto(ctx, db, cfg, "test")
	if err != nil || again.New != 0 || again.RunID == first.RunID {
		t.Errorf("second generation: run %d, %d new (err %v)", again.RunID, again.New, err)
	}
	stored, err := db.ListRules(ctx, store.Filter{})
	if err != nil || int64(len(stored)) != first.New {
		t.Fatalf("%d rules stored (err %v), want %d", len(stored), err, first.New)
	}
	for _, r := range stored {
		if r.Status != rules.StatusCandidate || r.RunID != first.RunID || len(r.Operators) == 0 {
			t.Errorf("stored rule %+v", r)
		}
	}
	runs, err := db.Runs(ctx)
	if err != nil || len(runs) != 2 || runs[0].Status != store.RunDone || runs[0].Stored != first.New {
		t.Errorf("runs %+v (err %v)", runs, err)
	}
}

// An interrupted generation writes no rules and says so in its run.
func TestGenerateIntoInterrupted(t *testing.T) {
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := enumerate.Config{Registry: rules.Default(), Pool: rules.DefaultPool(), MaxOps: 3, Seed: 1, Workers: 1,
		Progress: func(progress.Step) { cancel() }}
	if _, err := enumerate.GenerateInto(ctx, db, cfg, "test"); err == nil {
		t.Fatal("an interrupted generation succeeded")
	}
	runs, _ := db.Runs(context.Background())
	stats, _ := db.Stats(context.Background())
	if len(runs) != 1 || runs[0].Status != store.RunInterrupted || stats.Rules != 0 {
		t.Errorf("runs %+v, %d rules", runs, stats.Rules)
	}
}
