package enumerate

import (
	"context"
	"strings"
	"sync"
	"testing"

	"rulebook/fingerprint"
	"rulebook/rules"
)

// parallelRun is one real generation over the parallel set at degrees 2
// and 3 up to three operators (under a second), shared by the tests.
var parallelRun = sync.OnceValues(func() (*Result, error) {
	degrees := []int{2, 3}
	reg := rules.Parallel()
	return Generate(context.Background(), Config{Registry: reg, Degrees: degrees, MaxOps: 3, Seed: 1})
})

// TestDegreeRulesHoldAtDegrees2348 is issue 14's float test: every rule
// that generation stored with the degree variable d, read back from its
// stored text, agrees piece for piece at degrees 2, 3, 4 and 8 on random
// inputs of sizes divisible by 24.
func TestDegreeRulesHoldAtDegrees2348(t *testing.T) {
	res, err := parallelRun()
	if err != nil {
		t.Fatal(err)
	}
	check := DegreeCheck{Multiple: 24, Seed: 7, Tolerance: 1e-9}
	n := 0
	for _, c := range res.Candidates {
		text, err := rules.NewText(rules.All(), c.Text.Src, c.Text.Dst, c.Text.Inputs, c.Text.Constants)
		if err != nil {
			t.Fatalf("%s: stored text does not read back: %v", c.Text, err)
		}
		r := text.Rule()
		if !r.HasDegreeVar() {
			continue
		}
		n++
		for _, d := range []int{2, 3, 4, 8} {
			if err := FloatCheckAtDegree(r, d, check); err != nil {
				t.Errorf("%s (%s): %v", c.Text, c.Text.Inputs, err)
			}
		}
	}
	if n != int(res.Stats.Generalised) || n < 100 {
		t.Errorf("%d rules with d checked, generation counted %d generalised; expected the same, at least 100", n, res.Stats.Generalised)
	}
}

// TestFloatCheckAtDegreeCatchesDegreeTwoOnly: a rule that mixes d with a
// literal 2 holds at degree 2 only, and the check says so at 3 with the
// layouts that differ.
func TestFloatCheckAtDegreeCatchesDegreeTwoOnly(t *testing.T) {
	text, err := rules.NewText(rules.All(), "(partition 0 d (partition 1 2 ?a))", "(partition 1 d (partition 0 2 ?a))", "?a:6x6x6", "")
	if err != nil {
		t.Fatal(err)
	}
	check := DegreeCheck{Multiple: 24, Seed: 1, Tolerance: 1e-9}
	if err := FloatCheckAtDegree(text.Rule(), 2, check); err != nil {
		t.Fatalf("degree 2: %v", err)
	}
	err = FloatCheckAtDegree(text.Rule(), 3, check)
	if err == nil || !strings.Contains(err.Error(), "degree 3") || !strings.Contains(err.Error(), "source gives 24/3x24/2x24, target 24/2x24/3x24") {
		t.Fatalf("degree 3: expected a difference naming the degree and layouts, got %v", err)
	}
	// Equal values in different layouts are different pieces.
	text, err = rules.NewText(rules.All(), "(partition 0 d ?a)", "(partition 1 d ?a)", "?a:6x6x6", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := FloatCheckAtDegree(text.Rule(), 4, check); err == nil || !strings.Contains(err.Error(), "24/4x24x24") {
		t.Fatalf("expected a layout difference, got %v", err)
	}
}

// TestParallelGenerationGeneralises: rules found at degrees 2 and 3 are
// stored once with d (with reduce taking partial sums only, every rule of
// this generation is found at both); every stored shape reads back; and
// the counts add up over the degrees.
func TestParallelGenerationGeneralises(t *testing.T) {
	res, err := parallelRun()
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]rules.Text{}
	for _, c := range res.Candidates {
		texts[c.Text.String()] = c.Text
		degrees := map[int]bool{}
		c.Rule.EachDegree(func(d int) { degrees[d] = true })
		if degrees[2] && degrees[3] {
			t.Errorf("%s mixes degrees 2 and 3", c.Text)
		}
	}
	for _, want := range []string{
		"(linear none (partition 0 d ?a) (replicate d ?b)) => (partition 0 d (linear none ?a ?b))",
		"(combine 0 d (partition 0 d ?a)) => ?a",
		"(reduce d (linear none ?a (replicate d ?b))) => (linear none (reduce d ?a) ?b)",
		"(reduce d (replicate d ?a)) => (replicate d (reduce d ?a))",
	} {
		if _, ok := texts[want]; !ok {
			t.Errorf("missing %s", want)
		}
	}
	for _, bad := range []string{"(combine 0 2 (partition 0 2 ?a)) => ?a", "(combine 0 3 (partition 0 3 ?a)) => ?a"} {
		if _, ok := texts[bad]; ok {
			t.Errorf("%s should be stored with d only", bad)
		}
	}
	// d-rules record their shapes at the base degree.
	if in := texts["(reduce d (linear none ?a (replicate d ?b))) => (linear none (reduce d ?a) ?b)"].Inputs; in != "?a:4x4x4+sum2 ?b:4x4" {
		t.Errorf("shapes %q, expected them at degree 2", in)
	}
	st := res.Stats
	// Graphs counts the operator-free graphs (one or two inputs) too.
	if len(st.Levels) != 3 || st.Levels[0].Graphs+st.Levels[1].Graphs+st.Levels[2].Graphs > st.Graphs {
		t.Errorf("levels %+v do not add up to %d graphs", st.Levels, st.Graphs)
	}
	if st.Generalised == 0 || int(st.Generalised) >= len(res.Candidates) || st.Candidates < int64(len(res.Candidates)) {
		t.Errorf("stats %+v with %d candidates", st, len(res.Candidates))
	}
}

// TestFingerprintsSeeLayouts: equal data in different layouts hashes
// differently, so the generator never pairs partition(x) with x or two
// cuts of one tensor, and the float comparison refuses them too.
func TestFingerprintsSeeLayouts(t *testing.T) {
	base := rules.NewShape(6, 6, 6)
	var layouts []rules.Shape
	for _, text := range []string{"6x6x6", "6/2x6x6", "6x6/2x6", "6/3x6x6", "6x6x6+copy2", "6x6x6+copy3", "6/2x6x6+copy2",
		"6x6x6+copy256", "6x6x6+copy512", "6x6x6+sum256"} { // degrees beyond a byte too
		s, err := rules.ParseDims(text)
		if err != nil {
			t.Fatal(err)
		}
		layouts = append(layouts, s)
	}
	seen := map[uint64]string{}
	in := fingerprint.Inputs{Seed: 1}
	for _, s := range layouts {
		x := in.Int(0, base)
		x.Shape = s // the same values, laid out differently
		h := fingerprint.Tensor(x)
		if prev, dup := seen[h]; dup {
			t.Errorf("%s and %s hash alike", prev, s)
		}
		seen[h] = s.String()
		y := in.Float(0, 0, base)
		z := in.Float(0, 0, base)
		y.Shape = s
		if s.Parallel() && Close(y, z, 1e-9) {
			t.Errorf("%s and %s compare close", s, base)
		}
	}
	// Degrees 2 and 3 are distinct templates, so distinct graphs.
	reg := rules.Parallel()
	two, three := templates(reg, rules.ParallelPool(2), 2), templates(reg, rules.ParallelPool(3), 3)
	for i := range two {
		if two[i].op.Name == "partition" && two[i].String() == three[i].String() {
			t.Errorf("template %s is the same at degrees 2 and 3", two[i])
		}
	}
}

// TestParseDegrees: bad --degrees values are refused in one line.
func TestParseDegrees(t *testing.T) {
	got, err := rules.ParseDegrees("3, 2")
	if err != nil || len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("ParseDegrees(3, 2) = %v, %v", got, err)
	}
	for _, bad := range []string{"0", "1", "-3", "two", "2,2", "1025", "", "2,,3"} {
		_, err := rules.ParseDegrees(bad)
		if err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseDegrees(%q): expected a one-line error, got %v", bad, err)
		}
	}
	if _, _, err := Operators("", "3", true); err == nil || !strings.HasPrefix(err.Error(), "--degrees: ") {
		t.Errorf("degrees for the default set: got %v, expected a refusal naming --degrees", err)
	}
	if reg, d, err := Operators("", "2", false); err != nil || d != nil || len(reg.Names()) != len(rules.Default().Names()) {
		t.Errorf("default set: got %v, %v; expected TASO's set without degrees", d, err)
	}
	if _, d, err := Operators("parallel", "3,2", true); err != nil || len(d) != 2 {
		t.Errorf("parallel set at 3,2: got %v, %v", d, err)
	}
	if _, _, err := Operators("parallel", "1", true); err == nil || !strings.HasPrefix(err.Error(), "--degrees: degree \"1\"") {
		t.Errorf("degree 1: got %v", err)
	}
	if _, err := Generate(context.Background(), Config{Registry: rules.Default(), Pool: rules.DefaultPool(), MaxOps: 1, Degrees: []int{2}}); err == nil {
		t.Error("Generate took degrees for a set without degree parameters")
	}
}
