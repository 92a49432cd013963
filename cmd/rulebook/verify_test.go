package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"rulebook/store"
)

func smallDB(t *testing.T) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "r.db")
	if _, err := run(context.Background(), "generate", "--max-ops", "3", "--ops", "ewadd,ewmul,relu,transpose", "--db", db, "--no-progress"); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestVerifyStoresResultsAndResumes(t *testing.T) {
	db := smallDB(t)
	ctx := context.Background()
	// An interrupted run keeps what it finished; the re-run does the rest.
	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	if _, err := run(short, "verify", "../../axioms", "--db", db, "--workers", "1", "--no-progress"); err == nil {
		t.Log("verification finished before the interruption")
	}
	out, err := run(ctx, "verify", "../../axioms", "--db", db, "--no-progress")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`\d+ rules verified in .*: \d+ proved, \d+ unknown, 0 refuted`).MatchString(out) {
		t.Errorf("summary:\n%s", out)
	}
	s, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	rs, _ := s.ListRules(ctx, store.Filter{})
	for _, r := range rs {
		p, ok, err := s.LatestProof(ctx, r.ID)
		if err != nil || !ok {
			t.Errorf("rule %d has no proof after the re-run (%v)", r.ID, err)
		}
		if r.Status != p.Status {
			t.Errorf("rule %d status %s, latest proof %s", r.ID, r.Status, p.Status)
		}
	}
	s.Close()
	again, err := run(ctx, "verify", "../../axioms", "--db", db, "--no-progress")
	if err != nil || !strings.Contains(again, "0 rules verified") {
		t.Errorf("a third run verified again (err %v):\n%s", err, again)
	}
	why, err := run(ctx, "why", "1", "--db", db)
	if err != nil || !strings.Contains(why, "the proof uses") {
		t.Errorf("why 1 (err %v):\n%s", err, why)
	}
}

// TestMalformedAxiomsChangeNothing: a bad axiom file is reported as
// file:line:col and the database stays byte-for-byte the same.
func TestMalformedAxiomsChangeNothing(t *testing.T) {
	db := smallDB(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "bad.smt2"), []byte("; comment\n(assert (! (forall ((x Tensor)) (= (relu x) (frob x))) :named r))\n"), 0o644)
	before := fileHash(t, db)
	_, err := run(context.Background(), "verify", dir, "--db", db)
	want := filepath.Join(dir, "bad.smt2") + ":2:46: unknown operator \"frob\""
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want %q", err, want)
	}
	if fileHash(t, db) != before {
		t.Error("the database changed")
	}
}

func TestVerifyTimeoutIsStoredAsUnknown(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	ctx := context.Background()
	if _, err := run(ctx, "generate", "--max-ops", "3", "--ops", "ewmul,relu", "--db", db, "--no-progress"); err != nil {
		t.Fatal(err)
	}
	out, err := run(ctx, "verify", "../../axioms", "--db", db, "--timeout", "1ms", "--no-progress")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "unknown  timeout") {
		t.Errorf("no rule timed out:\n%s", out)
	}
}

func TestAxiomsCheckCatchesWrongAxiom(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Z3 on every axiom")
	}
	dir := t.TempDir()
	src, _ := os.ReadFile("../../axioms/testdata/wrong/transpose-matmul-unswapped.smt2")
	good, _ := os.ReadFile("../../axioms/core.smt2")
	os.WriteFile(filepath.Join(dir, "core.smt2"), good, 0o644)
	os.WriteFile(filepath.Join(dir, "wrong.smt2"), src, 0o644)
	out, err := run(context.Background(), "axioms", "check", dir, "--max-dim", "2")
	if err == nil || !strings.Contains(err.Error(), "axiom transpose-matmul-unswapped is false") {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(out, "transpose-matmul-unswapped (") || !strings.Contains(out, "consistency: consistent") {
		t.Errorf("report:\n%s", out)
	}
}
