package verify

import (
	"context"
	"testing"
	"time"

	"rulebook/enumerate"
	"rulebook/rules"
)

// TestGeneratedParallelRulesDecided generates the parallel candidates up to
// two operators at degrees 2 and 3, as 'rulebook generate --ops parallel
// --degrees 2,3 --max-ops 2' does, and verifies them, each swept at every
// combined layout as a generation over degrees claims: none is left
// unknown, and no proved rule has a counterexample in float64, at degrees
// 2, 3 and 4 for those with the degree variable, or at other extents.
func TestGeneratedParallelRulesDecided(t *testing.T) {
	if testing.Short() {
		t.Skip("generates and verifies the parallel candidates")
	}
	ctx := context.Background()
	reg, degrees := rules.Parallel(), []int{2, 3}
	gen, err := enumerate.Generate(ctx, enumerate.Config{Registry: reg, Degrees: degrees, MaxOps: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var jobs []Job
	for i, c := range gen.Candidates {
		jobs = append(jobs, Job{ID: int64(i), Rule: c.Rule, Layouts: true})
	}
	cfg := Config{Registry: rules.All(), Axioms: loadAxioms(t), Budget: Budget{WallClock: 30 * time.Second}, Seed: 1, Workers: 2}
	res := runJobs(t, cfg, jobs)
	counts := map[rules.Status]int{}
	for _, j := range jobs {
		r := res[j.ID]
		counts[r.Status]++
		switch r.Status {
		case Unknown:
			t.Errorf("%s: unknown (%s)", j.Rule.Format(), r.Reason)
		case Refuted:
			t.Logf("%s: refuted: %s", j.Rule.Format(), r.Reason)
		case Proved:
			if why, found, err := Counterexample(ctx, j.Rule, 7); err != nil || found {
				t.Errorf("%s: proved with %v, but %s %v", j.Rule.Format(), r.Core, why, err)
			}
		}
	}
	t.Logf("%d candidates: %d proved, %d refuted, %d unknown", len(jobs), counts[Proved], counts[Refuted], counts[Unknown])
}
