package store

import (
	"context"
	"errors"
	"slices"
	"testing"

	"rulebook/rules"
)

// provedStore is a store with n rules, each with a recorded proof.
func provedStore(t *testing.T, n int) (*Store, []Rule) {
	t.Helper()
	ctx := context.Background()
	s := openTemp(t)
	run, err := s.BeginRun(ctx, "generate", "{}", 0, "test")
	mustNil(t, err)
	_, err = s.InsertRules(ctx, manyRules(run, n))
	mustNil(t, err)
	all, err := s.ListRules(ctx, Filter{})
	mustNil(t, err)
	set := AxiomSet{Hash: "00112233aabbccdd", Dir: "axioms", Axioms: 1, Text: "a\t\t(forall ...)\n"}
	mustNil(t, s.SaveAxiomSet(ctx, set))
	var proofs []Proof
	for _, r := range all {
		proofs = append(proofs, Proof{RuleID: r.ID, Text: r.Text, RunID: run, AxiomSet: set.Hash, Status: rules.StatusProved, Solver: "Z3 test", Budget: 1000})
	}
	mustNil(t, s.RecordProofs(ctx, proofs))
	return s, all
}

// A release publishes only the candidates whose proofs were
// re-established for their current claim: a claim recomputed by hand
// (nobody re-proved it) or re-established for another text is left out.
func TestReleasePublishesOnlyReestablished(t *testing.T) {
	ctx := context.Background()
	s, all := provedStore(t, 4)
	re := trustCandidates(t, s)
	delete(re, all[0].ID)
	re[all[1].ID] = Claim(rules.Text{Src: "(relu ?a)", Dst: "?a", Inputs: "?a:4x4"}, "00112233aabbccdd", "Z3 test", 1000, rules.StatusProved)
	v, leftOut, err := s.Release(ctx, "v1", "test", re)
	mustNil(t, err)
	if want := []int64{all[0].ID, all[1].ID}; v.Rules != 2 || !slices.Equal(leftOut, want) {
		t.Errorf("released %d rules, left out %v; want 2 and %v", v.Rules, leftOut, want)
	}
	if _, _, err := s.Release(ctx, "v2", "test", nil); err == nil {
		t.Error("a release with nothing re-established was accepted")
	}
}

// A tag that could be read as a hash prefix is refused, whatever its case
// or length, and a hash always finds the version it was taken from, even
// where an older database holds a tag equal to another version's hash.
func TestHashWinsOverTag(t *testing.T) {
	ctx := context.Background()
	s, all := provedStore(t, 3)
	v1, _, err := s.Release(ctx, "v1", "test", trustCandidates(t, s))
	mustNil(t, err)
	for _, tag := range []string{"1e27", "ABCD", "deadbeef", v1.Hash, v1.Hash[:12]} {
		if err := s.CheckNewTag(ctx, tag); !errors.Is(err, ErrHashLikeTag) {
			t.Errorf("tag %q: %v; want it refused as a hash prefix", tag, err)
		}
	}
	for _, tag := range []string{"abc", "v1e27", "1e27x", "2026.1", "rc-1"} {
		if err := s.CheckNewTag(ctx, tag); err != nil {
			t.Errorf("tag %q refused: %v", tag, err)
		}
	}
	// A second version, its tag v1's hash, as a database written before
	// such tags were refused may hold it.
	_, err = s.db.Exec(`UPDATE rules SET pruned_by = ? WHERE id = ?`, all[1].ID, all[0].ID)
	mustNil(t, err)
	v2, _, err := s.Release(ctx, "v2", "test", trustCandidates(t, s))
	mustNil(t, err)
	_, err = s.db.Exec(`DROP TRIGGER versions_immutable; UPDATE versions SET tag = ? WHERE id = ?`, v1.Hash, v2.ID)
	mustNil(t, err)
	for _, ref := range []string{v1.Hash, v1.Hash[:8], v1.Hash[:4]} {
		got, _, err := s.LoadVersion(ctx, ref)
		if err != nil || got.ID != v1.ID {
			t.Errorf("--rules %.12s… loaded version %d (%v); want v1 (%d)", ref, got.ID, err, v1.ID)
		}
	}
}

// Releasing the rule set of an existing version again makes the new tag
// an alias that names that version, and its hash, whole or as a prefix,
// keeps naming the first version rather than matching two.
func TestReReleaseIsAnAlias(t *testing.T) {
	ctx := context.Background()
	s, _ := provedStore(t, 3)
	v1, _, err := s.Release(ctx, "v1", "test", trustCandidates(t, s))
	mustNil(t, err)
	v2, _, err := s.Release(ctx, "v2", "test", trustCandidates(t, s))
	mustNil(t, err)
	if v2.SameAs != "v1" || v2.Hash != v1.Hash {
		t.Errorf("re-release: same as %q, hash %.12s; want an alias of v1", v2.SameAs, v2.Hash)
	}
	for _, ref := range []string{v1.Hash, v1.Hash[:MinHashPrefix]} {
		if got, _, err := s.LoadVersion(ctx, ref); err != nil || got.Tag != "v1" {
			t.Errorf("version %.12s: %q, %v; want v1", ref, got.Tag, err)
		}
	}
	if got, _, err := s.LoadVersion(ctx, "v2"); err != nil || got.Tag != "v2" {
		t.Errorf("v2 by tag: %q, %v", got.Tag, err)
	}
}
