package build_test

import (
	"context"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"rulebook/axioms"
	"rulebook/build"
	"rulebook/compare"
	"rulebook/fingerprint"
	"rulebook/internal/pool"
	"rulebook/internal/testfiles"
	"rulebook/rules"
	"rulebook/store"
	"rulebook/verify"
)

// TestFlexFlowAgainstParallelRelease builds the parallel release ('rulebook
// build --ops parallel --max-ops 3 --degrees 2,3'): every candidate is
// decided, every released rule holds at every combined layout of its
// inputs when swept again on other draws (every assignment at degrees 2
// and 3), and the ten rules issue 24 found false in the
// release before it are refuted by that sweep. It then relates FlexFlow's
// file to the release, under FlexFlow's reading and ours (checkReadings):
// every rule true at degrees 2, 3 and 4 that applies
// somewhere is contained or implied, every rule true under both FlexFlow's
// reading and ours too, and no rule the release contains or implies is
// refuted by our verifier.
func TestFlexFlowAgainstParallelRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("generates and proves the parallel release")
	}
	// It lives here, not beside the rest of compare's tests, so that no
	// package's tests need more than Go's 10-minute default: building the
	// release takes about 75 s of its 135 on two quiet cores.
	t.Parallel()
	ctx := context.Background()
	reg := rules.All()
	set, err := axioms.Builtin(reg)
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "pcg.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	sum, err := build.Run(ctx, db, build.Config{Registry: reg, Ops: rules.Parallel(), Degrees: []int{2, 3}, Axioms: set, MaxOps: 3, Seed: 1, Tag: "v1", ToolVersion: "test"})
	t.Logf("built in %s", time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if n := sum.Verified.Counts[verify.Unknown]; n != 0 {
		t.Errorf("%d candidates unknown, want every one decided", n)
	}
	_, released, err := db.VersionRules(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	sweepRelease(t, reg, released)
	t.Logf("swept again in %s", time.Since(start).Round(time.Second))
	start = time.Now()
	r, err := compare.File(ctx, db, testfiles.Shared(t, "anchors", "flexflow-graph_subst_3_v2.json"), "", "v1", compare.DefaultLimits, verify.Config{Registry: reg, Axioms: set}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("related FlexFlow's file in %s", time.Since(start).Round(time.Second))
	reached, holds, never := compare.EveryDegree(r.Verdicts)
	t.Logf("the parallel release holds %d rules; it contains or implies %d of FlexFlow's %d rules true at every degree (%d never apply)", sum.Version.Rules, reached, holds, never)
	if len(r.Verdicts) != 640 || reached < holds {
		t.Errorf("%d verdicts; %d of %d true rules contained or implied", len(r.Verdicts), reached, holds)
	}
	checkReadings(t, r.FlexFlow)
	for _, f := range r.FlexFlow {
		if f.Theirs == compare.ReadingTrue && f.Ours == compare.ReadingTrue && !f.Reached {
			t.Errorf("%s is true under FlexFlow's reading and ours, and the release neither contains nor implies it", f.Name)
		}
	}
	for i, v := range r.Verdicts {
		if (v.Relation == compare.Contained || v.Relation == compare.Implied) && r.Proofs[i].Status == verify.Refuted {
			t.Errorf("%s is %s, yet our verifier refutes it: %s", v.Name, v.Relation, v.Text)
		}
	}
}

// issue24False are the ten rules issue 24 found false in the parallel
// release of reduce on copies (its ids), with the extents they were found
// at: each moves a reduce across a linear.
var issue24False = map[string]string{
	"79":  "(linear none (reduce d (partition 1 d ?a)) ?b) => (reduce d (partition 1 d (linear none ?a ?b)))",
	"80":  "(linear none (reduce d (partition 1 d ?a)) ?b) => (partition 1 d (reduce d (linear none ?a ?b)))",
	"148": "(linear none ?a (reduce d (partition 1 d ?b))) => (reduce d (partition 2 d (linear none ?a ?b)))",
	"149": "(linear none ?a (reduce d (partition 1 d ?b))) => (partition 2 d (reduce d (linear none ?a ?b)))",
	"255": "(linear none (reduce d (replicate d ?a)) ?b) => (reduce d (replicate d (linear none ?a ?b)))",
	"257": "(linear none (reduce d (partition 0 d ?a)) ?b) => (reduce d (partition 0 d (linear none ?a ?b)))",
	"258": "(linear none (reduce d (partition 0 d ?a)) ?b) => (partition 0 d (reduce d (linear none ?a ?b)))",
	"390": "(reduce d (linear none (replicate d ?a) ?b)) => (linear none ?a (reduce d ?b))",
	"409": "(reduce d (linear none ?a (replicate d ?b))) => (linear none (reduce d ?a) ?b)",
	"464": "(linear none (reduce d (replicate d ?a)) ?b) => (replicate d (reduce d (linear none ?a ?b)))",
}

// sweepRelease sweeps every released rule, and issue24False as negative
// controls, on draws of a seed the verifier did not use, at every
// assignment of degrees 2 and 3 (the build's own sweep sampled 4 and 8).
// The rules are swept on GOMAXPROCS goroutines, as the verifier sweeps
// them, and their results checked in order.
func sweepRelease(t *testing.T, reg *rules.Registry, released []store.Rule) {
	t.Helper()
	in := fingerprint.Inputs{Seed: 7}
	cfg := rules.DefaultSweep()
	cfg.Seed, cfg.Int, cfg.Float, cfg.Sampled = 7, in.Int, in.Float, nil
	texts := make([]rules.Text, len(released))
	for i, sr := range released {
		text, err := sr.Checked(reg)
		if err != nil {
			t.Fatal(err)
		}
		texts[i] = text
	}
	ids := slices.Sorted(maps.Keys(issue24False))
	for _, id := range ids {
		r, err := rules.ParseText(reg, issue24False[id], "?a:4x4x4 ?b:4x4", "")
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, r)
	}
	results := make([]rules.SweepResult, len(texts))
	err := pool.Each(context.Background(), runtime.GOMAXPROCS(0), len(texts), func(_, i int) (err error) {
		results[i], err = texts[i].Rule().Sweep(context.Background(), cfg)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	evaluated := 0
	for i, sr := range released {
		if cx := results[i].Counterexample; cx != nil {
			t.Errorf("released rule %d, %s, fails %s", sr.ID, texts[i], cx)
		}
		evaluated += results[i].Evaluated
	}
	t.Logf("%d released rules hold at %d assignments of layouts", len(released), evaluated)
	for k, id := range ids {
		cx := results[len(released)+k].Counterexample
		if cx == nil {
			t.Errorf("issue 24's rule %s was not refuted: %s", id, issue24False[id])
			continue
		}
		t.Logf("issue 24's rule %s: %s", id, cx)
	}
}

// checkReadings checks the verdicts of FlexFlow's 640 rules under
// FlexFlow's reading and ours (rules.FlexFlowReading), counted per verdict:
// under FlexFlow's reading no rule is false in value. Each failed rule has
// a counterexample, and no true one has.
func checkReadings(t *testing.T, rs []compare.ReadingResult) {
	t.Helper()
	got, ours := map[compare.Reading]int{}, map[compare.Reading]int{}
	for _, r := range rs {
		got[r.Theirs]++
		ours[r.Ours]++
		failed := r.Theirs == compare.ReadingValue || r.Theirs == compare.ReadingLayout || r.Theirs == compare.ReadingTarget || r.Theirs == compare.ReadingDegree2
		if failed && r.Counterexample == "" || r.Theirs == compare.ReadingTrue && r.Counterexample != "" {
			t.Errorf("%s: %s with counterexample %q", r.Name, r.Theirs, r.Counterexample)
		}
	}
	want := map[compare.Reading]int{compare.ReadingTrue: 366, compare.ReadingDegree2: 2, compare.ReadingLayout: 27, compare.ReadingTarget: 109, compare.ReadingUnbound: 112, compare.ReadingNever: 24}
	if !maps.Equal(got, want) {
		t.Errorf("FlexFlow's reading: %v, want %v", got, want)
	}
	wantOurs := map[compare.Reading]int{compare.ReadingTrue: 319, compare.ReadingValue: 1, compare.ReadingLayout: 37, compare.ReadingTarget: 119, compare.ReadingUnbound: 112, compare.ReadingNever: 20, compare.ReadingTrivial: 32}
	if !maps.Equal(ours, wantOurs) {
		t.Errorf("ours: %v, want %v", ours, wantOurs)
	}
}
