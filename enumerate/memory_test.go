package enumerate

import (
	"context"
	"errors"
	"slices"
	"testing"

	"rulebook/internal/budget"
	"rulebook/rules"
)

// TestMemoryBudget: a cache held to a few hundred KiB by a small budget
// finds the same candidates as an unbounded one, and degrees or workers
// past the budget are refused before any work.
func TestMemoryBudget(t *testing.T) {
	reg, err := rules.SelectOps("parallel")
	if err != nil {
		t.Fatal(err)
	}
	texts := func(mem budget.Budget) []string {
		res, err := Generate(context.Background(), Config{Registry: reg, MaxOps: 2, Degrees: []int{2}, Seed: 1, Workers: 1, Memory: mem})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range res.Candidates {
			out = append(out, c.Text.String())
		}
		return out
	}
	if small, large := texts(budget.New(1<<20)), texts(budget.New(8<<30)); !slices.Equal(small, large) || len(small) == 0 {
		t.Errorf("%d candidates under 1 MiB, %d under 8 GiB", len(small), len(large))
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		is   error
	}{
		{"degree 1024", Config{Registry: reg, MaxOps: 1, Degrees: []int{1024}, Workers: 1, Memory: budget.New(1 << 40)}, budget.ErrExceeded},
		{"degree 64 in 64 MiB", Config{Registry: reg, MaxOps: 2, Degrees: []int{2, 64}, Workers: 1, Memory: budget.New(64 << 20)}, budget.ErrExceeded},
		{"degree 64 in 8 GiB", Config{Registry: reg, MaxOps: 2, Degrees: []int{2, 64}, Workers: 1, Memory: budget.New(8 << 30)}, ErrDegreeWork},
		{"a million workers", Config{Registry: reg, MaxOps: 1, Workers: 1_000_000}, ErrWorkers},
		{"workers past the budget", Config{Registry: reg, MaxOps: 1, Workers: 64, Memory: budget.New(32 << 20)}, budget.ErrExceeded},
	} {
		if _, err := Generate(context.Background(), tc.cfg); !errors.Is(err, tc.is) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.is)
		}
	}
}
