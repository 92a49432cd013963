package store

import (
	"context"
	"strings"
	"testing"

	"rulebook/rules"
)

// TestConditionedRuleStored checks that a rule's conditions are stored,
// read back, shown by rule_text, covered by the version's content hash and
// by the proof's claim (dropping the condition with SQL leaves the rule
// out of a release), while a rule without conditions hashes as before.
func TestConditionedRuleStored(t *testing.T) {
	ctx := context.Background()
	reg := rules.Default()
	texts := []string{
		"(conv2d 1 same none 1 (pool_avg 3 1 same ?a) ?b) => (pool_avg 3 1 same (conv2d 1 same none 1 ?a ?b)) if (kernel ?b 1 1)",
		"(ewadd ?a ?b) => (ewadd ?b ?a)",
	}
	cases := []struct {
		name string
		edit string // SQL run on the conditioned rule before the release
		// released are the rules the release holds, by index in texts.
		released []int
	}{
		{"as stored", "", []int{0, 1}},
		{"condition dropped", `UPDATE rules SET cond = '' WHERE cond <> ''`, []int{1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := openTemp(t)
			run, err := s.BeginRun(ctx, "generate", "{}", 0, "test")
			mustNil(t, err)
			var batch []Rule
			for _, text := range texts {
				rt, err := rules.ParseText(reg, text, "", "")
				mustNil(t, err)
				r := NewRule(rt)
				r.RunID = run
				batch = append(batch, r)
			}
			_, err = s.InsertRules(ctx, batch)
			mustNil(t, err)
			stored, err := s.ListRules(ctx, Filter{})
			mustNil(t, err)
			set := AxiomSet{Hash: "00112233aabbccdd", Dir: "axioms", Axioms: 1, Text: "a\t\t(forall ...)\n"}
			mustNil(t, s.SaveAxiomSet(ctx, set))
			var proofs []Proof
			for i, r := range stored {
				if r.String() != texts[i] {
					t.Fatalf("rule %d reads back as %q, want %q", i, r.String(), texts[i])
				}
				proofs = append(proofs, Proof{RuleID: r.ID, Text: r.Text, RunID: run, AxiomSet: set.Hash, Status: rules.StatusProved, Solver: "Z3 test", Budget: 1000})
			}
			mustNil(t, s.RecordProofs(ctx, proofs))
			var shown string
			mustNil(t, s.db.QueryRow(`SELECT rule FROM rule_text WHERE id = ?`, stored[0].ID).Scan(&shown))
			if shown != texts[0] {
				t.Errorf("rule_text shows %q, want %q", shown, texts[0])
			}
			if c.edit != "" {
				_, err := s.db.Exec(c.edit)
				mustNil(t, err)
			}
			v, _, err := s.Release(ctx, "v1", "test", trustCandidates(t, s))
			mustNil(t, err)
			var want []string
			for _, i := range c.released {
				want = append(want, texts[i])
			}
			if v.Hash != ContentHash(want) {
				t.Errorf("version hash %.12s, want the hash of %s", v.Hash, strings.Join(want, "; "))
			}
		})
	}
}
