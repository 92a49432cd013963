package verify

import (
	"testing"
	"time"

	"rulebook/rules"
)

// TestPointwiseProofs: identities that hold element by element because of
// what relu and max pooling do, which TASO's axioms cannot derive, are
// proved by pointwise reasoning, alone or as a lemma inside a larger term;
// false ones are not.
func TestPointwiseProofs(t *testing.T) {
	set := loadAxioms(t)
	cases := []struct {
		text, inputs string
		want         rules.Status
	}{
		{"(relu (ewmul ?a (relu ?b))) => (relu (ewmul ?b (relu ?a)))", "?a:2x4 ?b:2x4", Proved},
		{"(concat 0 ?a (relu (ewmul ?b (relu ?c)))) => (concat 0 ?a (relu (ewmul ?c (relu ?b))))", "?a:2x4 ?b:2x4 ?c:2x4", Proved},
		{"(ewmul (relu ?a) (pool_max 3 1 same ?a)) => (let ((%0 (relu ?a))) (ewmul %0 (pool_max 3 1 same %0)))", "?a:2x4x5x5", Proved},
		{"(relu (ewadd ?a (pool_max 3 1 same (relu ?a)))) => (relu (ewadd ?a (pool_max 3 1 same ?a)))", "?a:2x4x5x5", Proved},
		// Fails where a is negative and b positive.
		{"(relu (ewmul ?a ?b)) => (ewmul (relu ?a) (relu ?b))", "?a:2x4 ?b:2x4", Refuted},
	}
	var jobs []Job
	for i, c := range cases {
		jobs = append(jobs, Job{ID: int64(i), Rule: parse(t, c.text, c.inputs)})
	}
	res := runJobs(t, Config{Registry: rules.Default(), Axioms: set, Budget: Budget{WallClock: 10 * time.Second}, Seed: 1}, jobs)
	for i, c := range cases {
		if got := res[int64(i)]; got.Status != c.want {
			t.Errorf("%s: got %s (%s), want %s", c.text, got.Status, got.Reason, c.want)
		} else if c.want == Proved && !slicesContains(got.Core, PointwiseAxiom) {
			t.Errorf("%s: proved without the pointwise lemma: %v", c.text, got.Core)
		}
	}
}

func slicesContains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}
