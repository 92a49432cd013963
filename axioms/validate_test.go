package axioms

import (
	"context"
	"testing"
	"time"

	"rulebook/rules"
)

func TestShippedAxiomsHoldConcretely(t *testing.T) {
	if testing.Short() {
		t.Skip("exhaustive concrete check; skipped with -short")
	}
	reg := rules.All()
	set, err := Load("../axioms", reg)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	reports, err := Validate(context.Background(), set, reg, DefaultBound(), 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reports {
		t.Logf("%-28s %7d instances", r.Axiom.Name, r.Instances)
		if !r.OK() {
			t.Errorf("%s: %s", r.Axiom.Name, r.Counterexample)
		}
	}
	// verify's gate trusts this check for the set with ShippedDigest.
	if d := set.Digest(); d != ShippedDigest && !t.Failed() {
		t.Errorf("the shipped axioms' digest is %s, ShippedDigest says %s: set it, now that they hold", d, ShippedDigest)
	}
	t.Logf("checked %d axioms in %s", len(reports), time.Since(start))
}
