package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rulebook/store"
	"rulebook/version"
)

// TestPinnedRuleSets loads a released version from the store and from its
// exported bundle: both give the same rules, and an edited copy of either
// is refused.
func TestPinnedRuleSets(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	verifiedDB(t, db, "ewadd,ewmul,relu")
	bundle := filepath.Join(dir, "v1.json")
	for _, args := range [][]string{{"release", "v1"}, {"export", "--version", "v1", "--format", "json", "-o", bundle}} {
		if out, err := run(ctx, append(args, "--db", db)...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	s, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	fromStore, err := version.Load(ctx, s, "v1")
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	fromBundle, err := version.LoadBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	if fromStore.Hash != fromBundle.Hash || !slices.Equal(fromStore.Texts, fromBundle.Texts) || len(fromStore.Rules) == 0 {
		t.Errorf("store and bundle differ: %s (%d rules) vs %s (%d rules)", fromStore.Hash, len(fromStore.Texts), fromBundle.Hash, len(fromBundle.Texts))
	}

	data, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(dir, "edited.json")
	os.WriteFile(edited, []byte(strings.Replace(string(data), "ewmul", "ewadd", 1)), 0o644)
	if _, err := version.LoadBundle(edited); !errors.Is(err, version.ErrTampered) {
		t.Errorf("an edited bundle: %v", err)
	}

	execSQL(t, db, "UPDATE rules SET dst = '(relu ?a)' WHERE id = (SELECT min(rule_id) FROM version_rules)")
	s, err = store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := version.Load(ctx, s, "v1"); !errors.Is(err, version.ErrTampered) {
		t.Errorf("a version changed in the database: %v", err)
	}
}
