package build

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/axioms"
	"rulebook/rules"
	"rulebook/store"
)

func openTemp(t *testing.T) *store.Store {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "rb.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func config(t *testing.T) Config {
	t.Helper()
	reg := rules.Default()
	set, err := axioms.Builtin(rules.All())
	if err != nil {
		t.Fatal(err)
	}
	return Config{Registry: reg, Axioms: set, MaxOps: 2, Seed: 1, Workers: 2, ToolVersion: "test"}
}

// TestBuildReleasesAndIsReproducible: a build ends with a released version
// whose rules are all proved, the next build into the same database takes
// the next tag, and a build into a fresh database gives the same hash.
func TestBuildReleasesAndIsReproducible(t *testing.T) {
	ctx := context.Background()
	db := openTemp(t)
	first, err := Run(ctx, db, config(t))
	if err != nil {
		t.Fatal(err)
	}
	v := first.Version
	if v.Tag != "v1" || v.Rules == 0 || len(v.Provers) != 1 || !strings.Contains(v.Provers[0], "rlimit") {
		t.Fatalf("released %+v", v)
	}
	if names := stageNames(first); names != "generate verify prune release" {
		t.Errorf("stages %q", names)
	}
	_, texts, err := db.LoadVersion(ctx, v.Tag)
	if err != nil || len(texts) != v.Rules {
		t.Fatalf("loading %s: %d texts, %v", v.Tag, len(texts), err)
	}
	again, err := Run(ctx, db, config(t))
	if err != nil {
		t.Fatal(err)
	}
	if again.Version.Tag != "v2" || again.Version.Hash != v.Hash || again.Verified.Rules != 0 {
		t.Errorf("second build: %s, hash %.12s, %d rules verified again; want v2, the same hash, none", again.Version.Tag, again.Version.Hash, again.Verified.Rules)
	}
	fresh, err := Run(ctx, openTemp(t), config(t))
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Version.Hash != v.Hash {
		t.Errorf("a fresh database gave hash %.12s, want %.12s", fresh.Version.Hash, v.Hash)
	}
}

// TestTakenTagIsRefusedBeforeWork: a tag that exists, or is malformed,
// stops the build before it records any run.
func TestTakenTagIsRefusedBeforeWork(t *testing.T) {
	ctx := context.Background()
	db := openTemp(t)
	cfg := config(t)
	cfg.MaxOps, cfg.Tag = 1, "base"
	if _, err := Run(ctx, db, cfg); err != nil {
		t.Fatal(err)
	}
	runs := countRuns(t, db)
	for _, tag := range []string{"base", "-bad"} {
		cfg.Tag = tag
		if _, err := Run(ctx, db, cfg); err == nil {
			t.Errorf("tag %q: the build went ahead", tag)
		}
		if n := countRuns(t, db); n != runs {
			t.Errorf("tag %q: %d runs recorded before the refusal, %d after", tag, runs, n)
		}
	}
}

func countRuns(t *testing.T, db *store.Store) int {
	t.Helper()
	st, err := db.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return int(st.Runs)
}

func stageNames(s *Summary) string {
	var names []string
	for _, st := range s.Stages {
		names = append(names, st.Name)
	}
	return strings.Join(names, " ")
}
