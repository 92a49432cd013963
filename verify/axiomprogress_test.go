package verify

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"rulebook/axioms"
	"rulebook/internal/progress"
	"rulebook/rules"
)

// 'axioms check' reports its progress through each long step, every
// axiom once (issue 25: it ran minutes with no progress shown).
func TestAxiomCheckReportsProgress(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"relu-reduce.smt2", "concat-assoc-axes.smt2"} {
		data, err := os.ReadFile(filepath.Join("..", "axioms", "testdata", "wrong", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set, err := axioms.Load(dir, rules.All())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string][]int{}
	c := AxiomCheck{Timeout: 200 * time.Millisecond, Workers: 2, MaxDim: 1, Progress: func(s progress.Step) {
		mu.Lock()
		defer mu.Unlock()
		if s.Total != int64(len(set.Axioms)) {
			t.Errorf("%s: %d of %d, want of %d", s.Stage, s.Done, s.Total, len(set.Axioms))
		}
		seen[s.Stage] = append(seen[s.Stage], int(s.Done))
	}}
	_ = CheckAxioms(context.Background(), io.Discard, rules.All(), set, c) // the axioms are wrong: the check fails
	for _, step := range []string{"redundancy", "concrete"} {
		if got := seen[step]; len(got) != len(set.Axioms) {
			t.Errorf("%s reported %v, want each of %d axioms once", step, got, len(set.Axioms))
		}
	}
}
