package verify

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rulebook/axioms"
	"rulebook/rules"
	"rulebook/store"
)

// forgeDB is a database with two verified rules, one true and one false
// (refuted), and its path.
func forgeDB(t *testing.T, cfg Config) (db *store.Store, path string, trueID, falseID int64) {
	t.Helper()
	ctx := context.Background()
	path = filepath.Join(t.TempDir(), "forge.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	run, err := db.BeginRun(ctx, "generate", "{}", 1, "test")
	if err != nil {
		t.Fatal(err)
	}
	var batch []store.Rule
	for _, text := range []string{"(ewadd ?a ?b) => (ewadd ?b ?a)", "(relu ?a) => ?a"} {
		r := parse(t, text, "")
		if err := r.SetShapes("?a:4x4 ?b:4x4"[:len("?a:4x4")+7*(r.NumInputs-1)], ""); err != nil {
			t.Fatal(err)
		}
		c := store.NewRule(r.Format())
		c.RunID = run
		batch = append(batch, c)
	}
	if _, err := db.InsertRules(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if _, err := Stored(ctx, db, cfg, Request{ToolVersion: "test"}); err != nil {
		t.Fatal(err)
	}
	all, err := db.ListRules(ctx, store.Filter{})
	if err != nil || len(all) != 2 {
		t.Fatalf("rules: %v %v", all, err)
	}
	for _, r := range all {
		switch r.Status {
		case Proved:
			trueID = r.ID
		case Refuted:
			falseID = r.ID
		}
	}
	if trueID == 0 || falseID == 0 {
		t.Fatalf("verify did not prove one and refute the other: %+v", all)
	}
	return db, path, trueID, falseID
}

// A refuted rule set to proved with SQL, its claim recomputed by the
// documented formula (as a shell one-liner with sqlite3 can), is not
// released: release proves every rule again, and this one is not proved.
// Nor is a rule whose recorded proof names another axiom set.
func TestReleaseRefusesForgedClaim(t *testing.T) {
	ctx := context.Background()
	set := loadAxioms(t)
	cfg := Config{Registry: rules.All(), Axioms: set, Workers: 2, Seed: 1}
	db, path, trueID, falseID := forgeDB(t, cfg)
	falseRule, err := db.Rule(ctx, falseID)
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := db.LatestProof(ctx, falseID)
	if err != nil {
		t.Fatal(err)
	}
	forged := store.Claim(falseRule.Text, p.AxiomSet, p.Solver, p.Budget, rules.StatusProved)
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE rules SET status = 'proved' WHERE id = ?;`, falseID); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE proofs SET status = 'proved', claim = ?, core = '["ewadd-comm"]' WHERE rule_id = ?`, forged, falseID); err != nil {
		t.Fatal(err)
	}
	if cands, _, err := db.ReleaseCandidates(ctx); err != nil || len(cands) != 2 {
		t.Fatalf("the forgery did not take: %d candidates (%v), want both rules", len(cands), err)
	}
	r, err := Release(ctx, db, cfg, "v1", "test")
	if err != nil {
		t.Fatal(err)
	}
	if r.Version.Rules != 1 || len(r.Refused) != 1 || r.Refused[0].ID != falseID || r.Refused[0].Status == Proved {
		t.Errorf("released %d rules, refused %+v; want rule %d released and rule %d refused", r.Version.Rules, r.Refused, trueID, falseID)
	}
	_, texts, err := db.LoadVersion(ctx, "v1")
	if err != nil || slices.Contains(texts, falseRule.Text.String()) {
		t.Errorf("v1 holds %v (%v); the forged rule must not be in it", texts, err)
	}

	// The true rule's proof, recorded under another axiom set.
	if _, err := raw.Exec(`DROP TRIGGER IF EXISTS proofs_immutable; UPDATE proofs SET axiom_set = 'ffffffffffffffff' WHERE rule_id = ?`, trueID); err != nil {
		t.Fatal(err)
	}
	trueRule, _ := db.Rule(ctx, trueID)
	q, _, _ := db.LatestProof(ctx, trueID)
	if _, err := raw.Exec(`UPDATE proofs SET claim = ? WHERE rule_id = ?`, store.Claim(trueRule.Text, "ffffffffffffffff", q.Solver, q.Budget, rules.StatusProved), trueID); err != nil {
		t.Fatal(err)
	}
	r, err = Release(ctx, db, cfg, "v2", "test")
	if err == nil || r == nil || len(r.Refused) != 2 {
		t.Errorf("a release of rules proved under another axiom set: %v, %+v; want both refused and nothing released", err, r)
	}
}

// A budget beyond Z3's range is refused before anything is proved or
// recorded.
func TestBudgetBeyondZ3IsRefused(t *testing.T) {
	for _, units := range []uint64{1<<32 - 1 + 1, 1<<63 - 1, 1<<64 - 1} {
		if err := (Budget{Units: units}).Check(); err == nil {
			t.Errorf("budget %d accepted", units)
		}
	}
	if err := (Budget{Units: MaxUnits}).Check(); err != nil {
		t.Errorf("budget %d refused: %v", uint64(MaxUnits), err)
	}
}

// verify's gate is as strong as 'rulebook axioms check': an axiom false
// only at extent 3 (max pooling with a 3-wide window, stride 1, "same"
// padding, applied twice equals applying it once) is refused before
// anything is verified.
func TestGateCatchesAxiomFalseAtExtentThree(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	text := "; pool_max 3 1 same is idempotent: true at extents 1 and 2, false at 3\n" +
		"(assert (! (forall ((x Tensor)) (= (pool_max 3 1 padding.same (pool_max 3 1 padding.same x)) (pool_max 3 1 padding.same x))) :named pool-max-idem))\n"
	if err := os.WriteFile(filepath.Join(dir, "idem.smt2"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := axioms.Load(dir, rules.All())
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "gate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = RequireSound(ctx, db, rules.All(), set, 2)
	if !errors.Is(err, ErrUnsoundAxioms) || !strings.Contains(err.Error(), "pool-max-idem") {
		t.Errorf("the gate passed an axiom false at extent 3: %v", err)
	}
}
