package verify

import (
	"context"
	"testing"

	"rulebook/rules"
)

// TestSweepMemo: a remembered sweep gives what a fresh one gives, for a
// true rule and a false one, once per rule and seed.
func TestSweepMemo(t *testing.T) {
	ctx := context.Background()
	reg := rules.All()
	texts := []string{
		"(linear none (partition 0 d ?a) (replicate d ?b)) => (partition 0 d (linear none ?a ?b))",
		"(linear none (reduce d (partition 1 d ?a)) ?b) => (reduce d (partition 1 d (linear none ?a ?b)))", // issue 24's rule 79
	}
	var memo SweepMemo
	for _, seed := range []uint64{1, 7} {
		for _, text := range texts {
			parsed, err := rules.ParseText(reg, text, "?a:4x4x4 ?b:4x4", "")
			if err != nil {
				t.Fatal(err)
			}
			r := parsed.Rule()
			wantWhy, wantFound, err := LayoutSweep(ctx, r, seed)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				why, found, err := memo.sweep(ctx, r, seed)
				if err != nil || why != wantWhy || found != wantFound {
					t.Errorf("seed %d, %s: remembered (%q, %v, %v), fresh (%q, %v)", seed, text, why, found, err, wantWhy, wantFound)
				}
			}
			if seed == 1 && wantFound == (text == texts[0]) {
				t.Errorf("%s: found a counterexample: %v", text, wantFound)
			}
		}
	}
	if len(memo.done) != 4 {
		t.Errorf("%d outcomes kept, want 4 (two rules, two seeds)", len(memo.done))
	}
}
