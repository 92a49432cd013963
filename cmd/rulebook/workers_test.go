package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"rulebook/internal/budget"
)

// TestWorkersBounded: every --workers flag takes 1 to budget.MaxWorkers,
// refused before any work (a million workers once meant a million Z3
// contexts), and nothing is left beside the database.
func TestWorkersBounded(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "w.db")
	for _, args := range [][]string{
		{"verify", "--workers", "1000000"},
		{"verify", "--workers", "0"},
		{"compare", "--version", "v1", "--workers", "1000000", "x.sexpr"},
		{"compare", "--version", "v1", "--workers", "-1", "x.sexpr"},
		{"axioms", "check", "--workers", "1000000"},
		{"release", "v9", "--workers", "257"},
		{"generate", "--workers", "1000000", "--max-ops", "1"},
	} {
		_, err := run(context.Background(), append(args, "--db", db)...)
		if !errors.Is(err, budget.ErrWorkers) {
			t.Errorf("%v: %v, want budget.ErrWorkers", args, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused commands left %v", entries)
	}
}
