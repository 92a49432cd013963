package compare

import (
	"strings"
	"testing"
	"unicode/utf8"

	"rulebook/rewrite"
	"rulebook/rules"
	"rulebook/store"
	"rulebook/verify"
)

// compare's table stays readable (issue 25: lines ran to 290 columns): a
// long relation or name is cut, and a long proof reason, why or
// counterexample wraps under its rule, every word kept.
func TestCompareLinesStayNarrow(t *testing.T) {
	rule, err := rules.ParseRule(rules.All(), "(relu (relu ?a)) => (relu ?a)")
	if err != nil {
		t.Fatal(err)
	}
	ours := make([]store.Rule, 30)
	var steps []rewrite.Step
	for i := range ours {
		ours[i].ID = int64(1000 + i)
		steps = append(steps, rewrite.Step{Rule: i, Reversed: i%2 == 1})
	}
	long := strings.Repeat("at shapes ?a:3x4x5x6 the values differ by 0.25 ", 6)
	r := &Report{Ours: ours, Verdicts: []Verdict{
		{Foreign: Foreign{Name: strings.Repeat("a-very-long-rule-name-", 4), Rule: rule}, Relation: Implied, Steps: steps},
		{Foreign: Foreign{Name: "taso_12", Rule: rule}, Relation: Falsified, Counterexample: long},
	}, Proofs: []verify.Result{{Status: verify.Unknown, Reason: long}, {Status: verify.Refuted}}}
	var out strings.Builder
	r.WriteText(&out, "rules.json", true)
	for _, line := range strings.Split(out.String(), "\n") {
		if n := utf8.RuneCountInString(line); n > 120 {
			t.Errorf("a line of %d columns: %q", n, line)
		}
	}
	if got := strings.Count(out.String(), "0.25"); got != 12 {
		t.Errorf("the notes keep %d of 12 values:\n%s", got, out.String())
	}
}
