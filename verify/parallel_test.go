package verify

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"rulebook/axioms"
	"rulebook/rules"
)

func parseParallel(t *testing.T, text, inputs string) *rules.Rule {
	t.Helper()
	r, err := rules.ParseRule(rules.All(), text)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetShapes(inputs, ""); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestParallelRules verifies a table of parallel rules with the shipped
// axioms: each true one is proved, those with the degree variable d for
// every degree; each false one is refuted with a counterexample.
func TestParallelRules(t *testing.T) {
	cases := []struct {
		text, inputs string
		want         rules.Status
		why          string // in the reason of a refutation
	}{
		{"(combine 1 d (partition 1 d ?a)) => ?a", "?a:6x6x6", Proved, ""},
		{"(reduce d (linear none (partition 2 d ?a) (partition 0 d ?b))) => (linear none ?a ?b)", "?a:6x6x6 ?b:6x6", Proved, ""},
		{"(linear none (replicate d ?a) (partition 1 d ?b)) => (partition 2 d (linear none ?a ?b))", "?a:6x6x6 ?b:6x6", Proved, ""},
		{"(reduce d (ewadd ?a ?b)) => (ewadd (reduce d ?a) (reduce d ?b))", "?a:6x6x6+sum2 ?b:6x6x6+sum2", Proved, ""},
		{"(relu (replicate d (partition 0 d ?a))) => (replicate d (partition 0 d (relu ?a)))", "?a:6x6x6", Proved, ""},
		{"(reduce d (replicate d ?a)) => (replicate d (reduce d ?a))", "?a:6x6x6+sum2", Proved, ""},
		{"(partition 0 2 (relu ?a)) => (relu (partition 0 2 ?a))", "?a:6x6", Proved, ""},
		// the six candidates left unknown before linear-move-row-cut,
		// linear-row-cuts and partition-combine-commute
		{"(linear none (combine 1 d (partition 0 d ?a)) ?b) => (partition 0 d (combine 1 d (linear none ?a ?b)))", "?a:4x4/2x4+copy2 ?b:4x4+copy2", Proved, ""},
		{"(combine 0 d (linear relu (partition 0 d ?a) ?b)) => (combine 1 d (linear relu (partition 1 d ?a) ?b))", "?a:4x4x4 ?b:4x4+copy2", Proved, ""},
		// reduce adds partial sums and leaves copies
		{"(reduce d (replicate d ?a)) => ?a", "?a:6x6x6+sum2", Refuted, "+copy2"},
		// cutting the contraction leaves partial sums, not cut columns
		{"(linear none (partition 2 d ?a) (partition 0 d ?b)) => (partition 2 d (linear none ?a ?b))", "?a:6x6x6 ?b:6x6", Refuted, "+sum2"},
		// The product's partial sums are numbered operand sum first, so the
		// target's reduce adds other pieces than the source's (Z3 proved it
		// through Unity's linear-reduce-input, false at such layouts).
		{"(linear none (reduce d (partition 0 d ?a)) ?b) => (reduce d (partition 0 d (linear none ?a ?b)))", "?a:4x4x4+sum2 ?b:4x4+copy2", Refuted, "element 0"},
		// Proved through linear-replicate, each side of which is laid out
		// validly somewhere; yet where ?a's rows are cut, the target's
		// linear needs ?b replicated, so the target cannot be laid out
		// where the source can.
		{"(linear none (replicate d ?a) (replicate d ?b)) => (replicate d (linear none ?a ?b))", "?a:4x4x4 ?b:4x4", Refuted, "do not model layouts"},
	}
	var jobs []Job
	for i, c := range cases {
		jobs = append(jobs, Job{ID: int64(i), Rule: parseParallel(t, c.text, c.inputs)})
	}
	cfg := Config{Registry: rules.All(), Axioms: loadAxioms(t), Budget: Budget{WallClock: 20 * time.Second}, Seed: 1, Workers: 2}
	res := runJobs(t, cfg, jobs)
	for i, c := range cases {
		r := res[int64(i)]
		if r.Status != c.want || !strings.Contains(r.Reason, c.why) {
			t.Errorf("%s: %s (%s), want %s with %q", c.text, r.Status, r.Reason, c.want, c.why)
			continue
		}
		t.Logf("%s: %s %s %v", c.text, r.Status, r.Reason, r.Core)
	}
}

// TestDefaultProofsUnchangedByParallelAxioms: a rule of the default set
// gets exactly the axioms it got before parallel.smt2 existed, and its
// proof spends the same resource units and uses the same axioms.
func TestDefaultProofsUnchangedByParallelAxioms(t *testing.T) {
	set := loadAxioms(t)
	dir := t.TempDir()
	files, _ := filepath.Glob("../axioms/*.smt2")
	for _, f := range files {
		if filepath.Base(f) == "parallel.smt2" {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old, err := axioms.Load(dir, rules.Default())
	if err != nil {
		t.Fatal(err)
	}
	names := func(axs []*axioms.Axiom) []string {
		var out []string
		for _, a := range axs {
			out = append(out, a.Name)
		}
		return out
	}
	if got, want := names(RelevantAxioms(set, nil)), names(old.Axioms); !slices.Equal(got, want) {
		t.Fatalf("a default rule gets %v, want %v", got, want)
	}
	var jobs []Job
	for i, text := range []string{
		"(transpose (matmul ?a (transpose ?b))) => (matmul ?b (transpose ?a))",
		"(relu (concat 0 ?a (relu ?b))) => (relu (concat 0 ?a ?b))",
		"(ewmul (ewmul ?a ?b) (relu ?a)) => (let ((%0 (relu ?a))) (ewmul %0 (ewmul ?b %0)))",
	} {
		jobs = append(jobs, Job{ID: int64(i), Rule: parse(t, text, "")})
	}
	withParallel := runJobs(t, Config{Registry: rules.All(), Axioms: set, Budget: Budget{WallClock: 20 * time.Second}}, jobs)
	without := runJobs(t, Config{Registry: rules.Default(), Axioms: old, Budget: Budget{WallClock: 20 * time.Second}}, jobs)
	for i, j := range jobs {
		a, b := withParallel[int64(i)], without[int64(i)]
		if a.Status != Proved || a.Units != b.Units || !slices.Equal(a.Core, b.Core) {
			t.Errorf("%s: %s in %d units with %v; without parallel.smt2 %s in %d units with %v", j.Rule.Format(), a.Status, a.Units, a.Core, b.Status, b.Units, b.Core)
		}
	}
}

// TestRelevantAxioms: a parallel rule gets the parallel axioms whose
// operators it applies or can reach, not the others; an axiom about
// convolutions or pools only where one can occur.
func TestRelevantAxioms(t *testing.T) {
	set := loadAxioms(t)
	r := parseParallel(t, "(partition 0 d (relu ?a)) => (relu (partition 0 d ?a))", "?a:6x6")
	got := map[string]bool{}
	for _, a := range RelevantAxioms(set, ruleParallelSymbols(r)) {
		got[a.Name] = true
	}
	for name, want := range map[string]bool{"partition-relu": true, "partition-commute": true, "ewadd-comm": true,
		"linear-relu": false, "partition-replicate": false, "reduce-one": false, "conv-partition-batch": false, "pool-max-partition": false,
		"batchnorm-partition-channels": false, "batchnorm-concat-order": false} {
		if got[name] != want {
			t.Errorf("%s given: %v, want %v", name, got[name], want)
		}
	}
	// batchnorm's channel cut gets batchnorm's axioms, even those whose
	// patterns hold no batchnorm.
	r = parseParallel(t, "(batchnorm (partition 1 d ?a)) => (partition 1 d (batchnorm ?a))", "?a:4x4x5x5")
	got = map[string]bool{}
	for _, a := range RelevantAxioms(set, ruleDimensionKeys(r, ruleParallelSymbols(r))) {
		got[a.Name] = true
	}
	for _, name := range []string{"batchnorm-partition-channels", "batchnorm-replicate", "batchnorm-concat-order"} {
		if !got[name] {
			t.Errorf("%s not given to batchnorm's channel cut", name)
		}
	}
	// A convolution's batch cut gets the convolution's parallel axioms,
	// not the pools'.
	r = parseParallel(t, "(conv2d 1 same none 1 (partition 0 d ?a) (replicate d ?b)) => (partition 0 d (conv2d 1 same none 1 ?a ?b))", "?a:4x4x5x5 ?b:4x4x3x3")
	keys := ruleDimensionKeys(r, ruleParallelSymbols(r))
	got = map[string]bool{}
	for _, a := range RelevantAxioms(set, keys) {
		got[a.Name] = true
	}
	for name, want := range map[string]bool{"conv-partition-batch": true, "conv-replicate": true, "partition-replicate": true, "pool-max-partition": false, "pool-avg-reduce": false} {
		if got[name] != want {
			t.Errorf("conv2d's batch cut: %s given: %v, want %v", name, got[name], want)
		}
	}
	// Attention's heads cut gets attention's axioms, which take no
	// parameter (present names them without one), and not conv2d's.
	r = parseParallel(t, "(attn_softmax (partition 1 d ?a) (partition 1 d ?b)) => (partition 1 d (attn_softmax ?a ?b))", "?a:4x4x5x5 ?b:4x4x5x5")
	keys = ruleDimensionKeys(r, ruleParallelSymbols(r))
	got = map[string]bool{}
	for _, a := range RelevantAxioms(set, keys) {
		got[a.Name] = true
	}
	for name, want := range map[string]bool{"attn-softmax-partition": true, "attn-softmax-replicate": true, "conv-partition-batch": false, "embedding-partition-indices": false} {
		if got[name] != want {
			t.Errorf("attention's heads cut: %s given: %v, want %v", name, got[name], want)
		}
	}
}

// concatGeometryCols swaps nested concats on axis 2 and another axis: it
// applies no parallel operator, so only the literal axis 2 of its patterns
// keeps it from the default set's rules.
const concatGeometryCols = `
; concatenating on a row axis the rank-3 column concats equals concatenating on columns the row concats
(assert (! (forall ((a Int) (x Tensor) (y Tensor) (z Tensor) (w Tensor)) (=> (not (= a 2)) (= (concat a (concat 2 x y) (concat 2 z w)) (concat 2 (concat a x z) (concat a y w))))) :named concat-geometry-cols))
`

// TestRelevantAxiomsByLiteralDimension: a parallel.smt2 axiom whose
// patterns apply concat at axis 2 is given to a rule that applies concat at
// axis 2 and is kept from a rule that does not.
func TestRelevantAxiomsByLiteralDimension(t *testing.T) {
	dir := t.TempDir()
	files, _ := filepath.Glob("../axioms/*.smt2")
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == parallelFile {
			src = append(src, concatGeometryCols...)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set, err := axioms.Load(dir, rules.All())
	if err != nil {
		t.Fatal(err)
	}
	given := func(r *rules.Rule) bool {
		keys := ruleDimensionKeys(r, ruleParallelSymbols(r))
		return slices.ContainsFunc(RelevantAxioms(set, keys), func(a *axioms.Axiom) bool { return a.Name == "concat-geometry-cols" })
	}
	cols := parse(t, "(concat 0 (concat 2 ?a ?b) (concat 2 ?c ?d)) => (concat 2 (concat 0 ?a ?c) (concat 0 ?b ?d))", "")
	rows := parse(t, "(concat 0 (concat 1 ?a ?b) (concat 1 ?c ?d)) => (concat 1 (concat 0 ?a ?c) (concat 0 ?b ?d))", "")
	if !given(cols) || given(rows) {
		t.Fatalf("concat-geometry-cols given to the axis-2 rule: %v (want true), to the axis-1 rule: %v (want false)", given(cols), given(rows))
	}
	// concat.smt2's concat-geometry, generalised to any two axes, proves
	// it as well, so the core may name either.
	got := runJobs(t, Config{Registry: rules.All(), Axioms: set, Budget: Budget{WallClock: 20 * time.Second}}, []Job{{ID: 1, Rule: cols}})
	if got[1].Status != Proved {
		t.Fatalf("axis-2 concat swap: %s with core %v, want proved", got[1].Status, got[1].Core)
	}
}
