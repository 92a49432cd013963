package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildCommand: build ends with a released version and says so; a
// second build under the same tag is refused before any work and leaves
// the database as it was.
func TestBuildCommand(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "rb.db")
	out, err := run(ctx, "build", "--max-ops", "2", "--tag", "first", "--no-progress", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"generate", "verify", "prune", "release", "released first:", "rlimit 1000000"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	before := fileHash(t, db)
	_, err = run(ctx, "build", "--max-ops", "2", "--tag", "first", "--no-progress", "--db", db)
	if err == nil || !strings.Contains(err.Error(), "version first already exists") {
		t.Errorf("a taken tag: %v", err)
	}
	if fileHash(t, db) != before {
		t.Error("the refused build changed the database")
	}
	if _, err := run(ctx, "build", "--max-ops", "2", "--axioms", t.TempDir(), "--db", db); err == nil || !strings.Contains(err.Error(), "no *.smt2 axiom files") {
		t.Errorf("an empty axiom folder: %v", err)
	}
}
