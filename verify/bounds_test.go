package verify

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rulebook/axioms"
	"rulebook/rules"
)

// TestFloatTestIsBounded: rules recorded at sizes no float64 test can
// evaluate (rules imported from files may record any) are tested at the
// other shapes only, in bounded time and memory, and an unknown verdict
// says that the recorded shapes were not tested. Such a rule once made
// verify and compare allocate until the machine killed them.
func TestFloatTestIsBounded(t *testing.T) {
	set := loadAxioms(t)
	huge := "?a:100000x100000 ?b:100000x100000"
	// The units bound the proof; the wall clock is only a backstop, wide
	// enough that a busy machine reaches the units first (10 s once ran
	// out under a load of 14 on 2 cores, and the verdict said timeout).
	cfg := Config{Registry: rules.Default(), Axioms: set, Budget: Budget{Units: 100, WallClock: time.Minute}, Seed: 1}
	jobs := []Job{
		{ID: 1, Rule: parse(t, "(ewadd ?a ?b) => (ewadd ?b ?a)", huge)},                                                // true, not proved in 100 units
		{ID: 2, Rule: parse(t, "(relu (ewadd ?a ?b)) => (ewadd (relu ?a) (relu ?b))", huge)},                           // false
		{ID: 3, Rule: parse(t, "(ewadd ?a ?b) => (ewadd ?b ?a)", "?a:4294967296x4294967296 ?b:4294967296x4294967296")}, // overflows int64
	}
	start := time.Now()
	res := runJobs(t, cfg, jobs)
	if r := res[1]; r.Status != Unknown || !strings.Contains(r.Reason, "not tested in float64 at the recorded shapes: "+huge+" needs more than the 4194304 elements") {
		t.Errorf("a true rule at huge shapes: %+v", r)
	}
	if r := res[2]; r.Status != Refuted || !strings.HasPrefix(r.Reason, "at ?a:") {
		t.Errorf("a false rule at huge shapes: %+v, want refuted at smaller shapes", r)
	}
	if r := res[3]; r.Status != Unknown || !strings.Contains(r.Reason, "not tested in float64") {
		t.Errorf("a rule at shapes whose size overflows: %+v", r)
	}
	// A generous bound: it catches the unbounded evaluation this test is
	// about (minutes, then the machine's memory), not slowness under load
	// (5 s was missed by 0.09 s on a 2-core machine with other work).
	if d := time.Since(start); d > 2*time.Minute {
		t.Errorf("took %s", d)
	}
	for _, c := range []struct {
		text, shapes string
		ok           bool
	}{
		{"(matmul (matmul ?a ?b) ?c) => (matmul ?a (matmul ?b ?c))", "?a:700x700 ?b:700x700 ?c:700x700", false}, // 1.4 G multiply-adds
		{"(matmul (matmul ?a ?b) ?c) => (matmul ?a (matmul ?b ?c))", "?a:2x4 ?b:4x4 ?c:4x4", true},
		{"(conv2d 1 same none 1 ?a ?b) => (conv2d 1 same none 1 ?a ?b)", "?a:1x64x128x128 ?b:64x64x15x15", false}, // 15 G
		{"(conv2d 1 same none 1 ?a ?b) => (conv2d 1 same none 1 ?a ?b)", "?a:2x4x5x5 ?b:4x4x3x3", true},
		{"(pool_max 3 1 same ?a) => (pool_max 3 1 same ?a)", "?a:1x1x2048x2048", false}, // 4 Mi elements each side
	} {
		if err := FloatTestable(parse(t, c.text, c.shapes)); (err == nil) != c.ok {
			t.Errorf("%s at %s: FloatTestable says %v", c.text, c.shapes, err)
		}
	}
}

// TestWallClockBoundsTheFloatTest: --timeout bounds a rule's float64
// tests as it bounds its proof. The rule is true and our one axiom cannot
// prove it, so the tests run in full: 16 draws of two 300×300 matrix
// products on each side, about a second and a half, stopped at the wall
// clock.
func TestWallClockBoundsTheFloatTest(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "one.smt2"), []byte("; ewadd is commutative\n(assert (! (forall ((x Tensor) (y Tensor)) (= (ewadd x y) (ewadd y x))) :named ewadd-comm))\n"), 0o644)
	set, err := axioms.Load(dir, rules.Default())
	if err != nil {
		t.Fatal(err)
	}
	rule := parse(t, "(matmul ?a (matmul ?b ?c)) => (matmul (matmul ?a ?b) ?c)", "?a:200x300 ?b:300x300 ?c:300x200")
	if err := FloatTestable(rule); err != nil {
		t.Fatal(err)
	}
	const wall = 300 * time.Millisecond
	cfg := Config{Registry: rules.Default(), Axioms: set, Budget: Budget{Units: 1 << 40, WallClock: wall}, Seed: 1}
	start := time.Now()
	res := runJobs(t, cfg, []Job{{ID: 1, Rule: rule}})
	took := time.Since(start)
	if r := res[1]; r.Status != Unknown || r.Reason != ReasonTimeout {
		t.Errorf("got %+v, want unknown (timeout)", r)
	}
	if took > wall+time.Second {
		t.Errorf("took %s with a %s wall clock", took, wall)
	}
	t.Logf("stopped after %s", took)
	untimed := time.Now()
	if _, found, err := Counterexample(context.Background(), rule, 1); found || err != nil {
		t.Fatalf("the rule is true: %v %v", found, err)
	}
	if d := time.Since(untimed); d < 2*wall {
		t.Errorf("the float test takes %s without a wall clock, too little to show the bound", d)
	}
}

// TestAxiomChecksHonourTheirTimeout: each Z3 query of 'rulebook axioms
// check' stops within its --timeout, give or take the second Z3 may take
// to notice: the consistency query within ten times it, each redundancy
// query (most of which Z3 cannot decide) within it.
func TestAxiomChecksHonourTheirTimeout(t *testing.T) {
	reg := rules.Default()
	set, err := axioms.Builtin(rules.All())
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 200 * time.Millisecond
	slack := func(d time.Duration) time.Duration { return max(d/10, time.Second) }
	start := time.Now()
	if _, _, err := Consistency(context.Background(), reg, set, 10*timeout); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*timeout+slack(10*timeout) {
		t.Errorf("consistency took %s with a limit of %s", took, 10*timeout)
	}
	reds, err := Redundancies(context.Background(), reg, set, timeout, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	undetermined := 0
	for _, r := range reds {
		if r.Elapsed > timeout+slack(timeout) {
			t.Errorf("redundancy of %s took %s with a limit of %s", r.Axiom, r.Elapsed, timeout)
		}
		if r.Status == Undetermined {
			undetermined++
		}
	}
	if undetermined == 0 {
		t.Errorf("no redundancy query ran into the limit: the test shows nothing")
	}
}
