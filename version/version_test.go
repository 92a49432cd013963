package version_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rulebook/axioms"
	"rulebook/build"
	"rulebook/exchange"
	"rulebook/rules"
	"rulebook/store"
	"rulebook/version"
)

// parallelDB releases v1 of the parallel operators, as 'rulebook build
// --ops parallel --degrees 2 --max-ops 2' does (a few seconds), and
// returns the database's path.
func parallelDB(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	reg := version.Registry()
	set, err := axioms.Builtin(reg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "pcg.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cfg := build.Config{Registry: reg, Ops: rules.Parallel(), Degrees: []int{2}, Axioms: set, MaxOps: 2, Seed: 1, Tag: "v1", ToolVersion: "test"}
	if _, err := build.Run(ctx, db, cfg); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestParallelVersion loads a version with parallel operators from the
// store, by FILE:TAG and from its bundle: every way gives the same rules,
// some of them parallel, and an edited bundle is refused.
func TestParallelVersion(t *testing.T) {
	ctx := context.Background()
	path := parallelDB(t)
	db, err := store.OpenExisting(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stored, err := version.Load(ctx, db, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(stored.Texts, func(s string) bool { return strings.Contains(s, "(combine ") }) {
		t.Fatalf("no rule of v1 uses combine: %q", stored.Texts)
	}
	if len(stored.IDs) != len(stored.Rules) || stored.Name != "v1" {
		t.Errorf("v1 loads as %q with %d ids for %d rules", stored.Name, len(stored.IDs), len(stored.Rules))
	}
	bundle := writeBundle(t, db, stored)
	for _, c := range []struct{ ref, name string }{
		{"v1", "v1"},
		{stored.Hash[:8], "v1"},
		{path + ":v1", path + ":v1"},
		{bundle, bundle + " (v1)"},
	} {
		got, err := version.Open(ctx, path, c.ref)
		if err != nil {
			t.Errorf("Open %s: %v", c.ref, err)
			continue
		}
		if got.Name != c.name || got.Hash != stored.Hash || !slices.Equal(got.Texts, stored.Texts) {
			t.Errorf("Open %s: %q %.12s, %d rules; want %q %.12s, %d rules", c.ref, got.Name, got.Hash, len(got.Texts), c.name, stored.Hash, len(stored.Texts))
		}
	}
	data, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(t.TempDir(), "edited.json")
	if err := os.WriteFile(edited, bytes.Replace(data, []byte("(combine "), []byte("(partition "), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := version.LoadBundle(edited); !errors.Is(err, version.ErrTampered) {
		t.Errorf("an edited bundle: %v, want ErrTampered", err)
	}
}

// writeBundle exports v1 as 'rulebook export --format json' does.
func writeBundle(t *testing.T, db *store.Store, s *version.Set) string {
	t.Helper()
	v, rs, err := db.VersionRules(context.Background(), s.Tag)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := exchange.Export(&b, version.Registry(), "json", v, rs, exchange.Selection{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "v1.json")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOpenRefuses: references that name nothing say what is missing, and
// no database is created.
func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	for _, c := range []struct{ ref, want string }{
		{filepath.Join(dir, "missing.json"), "missing.json: no such bundle file"},
		{missing + ":v1", missing + ": no such database (in FILE:TAG, FILE is a rulebook database)"},
		{"v1", "no such file"},
	} {
		if _, err := version.Open(context.Background(), missing, c.ref); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open %s: %v, want %q", c.ref, err, c.want)
		}
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("Open created %s", missing)
	}
}
