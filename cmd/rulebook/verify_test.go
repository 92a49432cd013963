package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"rulebook/axioms"
	"rulebook/rules"
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

// TestRetryUnknown: after a run under a small budget, a plain re-run has
// nothing to do and says what would (it once printed only "0 rules
// verified in 0s"); --retry-unknown with a larger budget verifies again
// exactly the rules left unknown, and then has nothing left to retry.
func TestRetryUnknown(t *testing.T) {
	db := smallDB(t)
	ctx := context.Background()
	first, err := run(ctx, "verify", "--db", db, "--budget", "9000", "--no-progress")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(\d+) rules verified in .*: (\d+) proved, (\d+) unknown`).FindStringSubmatch(first)
	if m == nil || m[2] == "0" || m[3] == "0" {
		t.Fatalf("a budget of 9000 units should prove some rules and leave some unknown:\n%s", first)
	}
	unknown := m[3]
	again, err := run(ctx, "verify", "--db", db, "--budget", "9000", "--no-progress")
	if err != nil || !strings.Contains(again, "0 rules verified") || !strings.Contains(again, "; "+unknown+" are unknown: --retry-unknown with a larger --budget retries them") {
		t.Errorf("a re-run (err %v):\n%s", err, again)
	}
	retry, err := run(ctx, "verify", "--db", db, "--retry-unknown", "--budget", "1000000", "--no-progress")
	if err != nil || !strings.Contains(retry, unknown+" rules verified in") || !strings.Contains(retry, ": "+unknown+" proved, 0 unknown, 0 refuted") {
		t.Errorf("--retry-unknown (err %v) should verify the %s unknown rules again:\n%s", err, unknown, retry)
	}
	s, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	rs, _ := s.ListRules(ctx, store.Filter{})
	budgets := map[uint64]int{}
	for _, r := range rs {
		p, _, err := s.LatestProof(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		budgets[p.Budget]++
	}
	s.Close()
	if fmt.Sprint(budgets[1000000]) != unknown || budgets[9000]+budgets[1000000] != len(rs) {
		t.Errorf("latest proofs by budget %v: want the %s retried under 1000000, the others under 9000", budgets, unknown)
	}
	done, err := run(ctx, "verify", "--db", db, "--retry-unknown", "--no-progress")
	if err != nil || !strings.Contains(done, "0 rules verified") || !strings.Contains(done, "no rule's latest result under axiom set") {
		t.Errorf("--retry-unknown with none unknown (err %v):\n%s", err, done)
	}
	one, err := run(ctx, "verify", "--db", db, "--rule", "1", "--no-progress")
	if err != nil || !strings.Contains(one, "1 rule verified in") {
		t.Errorf("--rule 1 (err %v):\n%s", err, one)
	}
	if _, err := run(ctx, "verify", "--db", db, "--retry-unknown", "--recheck"); err == nil || !strings.Contains(err.Error(), "cannot be combined with --recheck") {
		t.Errorf("--retry-unknown --recheck: %v", err)
	}
}

// TestVerifyOutsideTheRepository: in a folder without axioms/, verify
// uses the axioms compiled into the binary and names the set and its hash.
func TestVerifyOutsideTheRepository(t *testing.T) {
	dir := t.TempDir()
	runIn(t, dir, "generate", "--max-ops", "1", "--no-progress")
	out := runIn(t, dir, "verify", "--no-progress")
	set, err := axioms.Builtin(rules.All())
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("axiom set %s: %d axioms from %s; ", set.Hash, len(set.Axioms), axioms.BuiltinDir)
	// Progress lines may come first; the summary names the set, then
	// the rules verified.
	at := strings.Index(out, want)
	if at < 0 || (at > 0 && out[at-1] != '\n') || !strings.Contains(out[at:], " verified in ") {
		t.Errorf("verify in a folder without axioms/: want %q first, then the rules verified:\n%s", want, out)
	}
}

// heavyRule is true, but our one-axiom set cannot prove it and its float64
// tests (16 draws of two 300×300 products a side, then other shapes) take
// seconds: long enough to run into --timeout.
const heavyRule = "(matmul ?a (matmul ?b ?c)) => (matmul (matmul ?a ?b) ?c)  ; ?a:200x300 ?b:300x300 ?c:300x200 |\n"

// oneAxiom writes an axiom folder holding only ewadd's commutativity.
func oneAxiom(t *testing.T) string {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "one.smt2"), []byte("; ewadd is commutative\n(assert (! (forall ((x Tensor) (y Tensor)) (= (ewadd x y) (ewadd y x))) :named ewadd-comm))\n"), 0o644)
	return dir
}

// TestTimeoutIsHonoured: verify's and compare's --timeout bound a rule's
// whole decision, proof and float64 tests. The slack is a few seconds, not
// one, so that a busy machine (CI, other tests) does not fail it; the proof
// does not end within the limit, as the verdict shows.
func TestTimeoutIsHonoured(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "heavy.sexpr")
	os.WriteFile(file, []byte(heavyRule), 0o644)
	db := filepath.Join(dir, "r.db")
	if _, err := run(ctx, "import", file, "--db", db); err != nil {
		t.Fatal(err)
	}
	ax := oneAxiom(t)
	const limit, slack = time.Second, 4 * time.Second
	start := time.Now()
	out, err := run(ctx, "verify", ax, "--db", db, "--timeout", limit.String(), "--no-progress")
	if took := time.Since(start); err != nil || took > limit+slack || !strings.Contains(out, "unknown  timeout") {
		t.Errorf("verify --timeout %s took %s (err %v):\n%s", limit, took, err, out)
	}
	released, _ := releasedDB(t)
	start = time.Now()
	out, err = run(ctx, "compare", "--version", "v1", file, "--db", released, "--axioms", ax, "--timeout", limit.String(), "--no-progress")
	if took := time.Since(start); err != nil || took > limit+slack || !strings.Contains(out, "unknown (timeout)") {
		t.Errorf("compare --timeout %s took %s (err %v):\n%s", limit, took, err, out)
	}
}

// nestedRelu is n relus around ?a, as rule text.
func nestedRelu(n int) string {
	return strings.Repeat("(relu ", n) + "?a" + strings.Repeat(")", n)
}

// TestDeepInputsAreRefused: a rule or an axiom nested 100,000 deep, which
// once crashed verify with a stack overflow in Z3, is refused with its
// place and the limit: by import (nothing is written), by verify (for a
// rule stored before the limit existed) and by axioms check, at once.
func TestDeepInputsAreRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := smallDB(t)
	deepRule := filepath.Join(dir, "deep.sexpr")
	os.WriteFile(deepRule, []byte(nestedRelu(100_000)+" => (relu ?a)\n"), 0o644)
	before := fileHash(t, db)
	if _, err := run(ctx, "import", deepRule, "--db", db); err == nil || !strings.Contains(err.Error(), deepRule+":1:1537: operators nested more than 256 deep (rulebook's limit)") {
		t.Errorf("import: %v", err)
	}
	if fileHash(t, db) != before {
		t.Error("the refused import changed the database")
	}
	s, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	runID, _ := s.BeginRun(ctx, "import", "{}", 0, "test")
	_, err = s.InsertRules(ctx, []store.Rule{{Hash: "00000000000000d1", Text: rules.Text{Src: nestedRelu(100_000), Dst: "(relu ?a)"}, SrcOps: 100_000, DstOps: 1, NumInputs: 1, NumOutputs: 1, Operators: []string{"relu"}, RunID: runID}})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run(ctx, "verify", "--db", db, "--no-progress"); err == nil || !regexp.MustCompile(`rule \d+: 1:1537: operators nested more than 256 deep \(rulebook's limit\)`).MatchString(err.Error()) {
		t.Errorf("verify of a stored deep rule: %v", err)
	}
	ax := t.TempDir()
	os.WriteFile(filepath.Join(ax, "deep.smt2"), []byte("; deep\n(assert (! (forall ((x Tensor)) (= "+strings.ReplaceAll(nestedRelu(100_000), "?a", "x")+" (relu x))) :named deep))\n"), 0o644)
	want := filepath.Join(ax, "deep.smt2") + ":2:1548: lists nested more than 256 deep (rulebook's limit)"
	for _, args := range [][]string{{"verify", ax, "--db", smallDB(t)}, {"axioms", "check", ax}} {
		start := time.Now()
		if _, err := run(ctx, args...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s with a deep axiom: %v", args[0], err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s took %s to refuse a deep axiom", args[0], took)
		}
	}
}

// TestHugeShapesAreBounded: rules that record shapes no float64 test can
// evaluate, which once made verify and compare allocate until they were
// killed, are tested at smaller shapes only: a false one is refuted there,
// and a true one left unknown says that its recorded shapes were not
// tested.
func TestHugeShapesAreBounded(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "huge.json")
	os.WriteFile(file, []byte(`{"format": "rulebook-rules/1", "rules": [
 {"src": "(relu (ewadd ?a ?b))", "dst": "(ewadd (relu ?a) (relu ?b))", "inputs": "?a:100000x100000 ?b:100000x100000"},
 {"src": "(transpose (transpose ?a))", "dst": "?a", "inputs": "?a:4294967296x4294967296"}]}`), 0o644)
	db := filepath.Join(t.TempDir(), "r.db")
	if _, err := run(ctx, "import", file, "--db", db); err != nil {
		t.Fatal(err)
	}
	out, err := run(ctx, "verify", oneAxiom(t), "--db", db, "--budget", "100000", "--no-progress")
	if err != nil || !regexp.MustCompile(`refuted +at \?a:\d+x\d+ \?b:\d+x\d+: output 0`).MatchString(out) || !strings.Contains(out, "not tested in float64 at the recorded shapes: ?a:4294967296x4294967296 needs more than") {
		t.Errorf("verify (err %v):\n%s", err, out)
	}
	released, _ := releasedDB(t)
	out, err = run(ctx, "compare", "--version", "v1", file, "--db", released, "--axioms", oneAxiom(t), "--no-progress", "--all")
	if err != nil || !regexp.MustCompile(`refuted .*\n +proof: at \?a:`).MatchString(out) || !strings.Contains(out, "not tested in float64") {
		t.Errorf("compare (err %v):\n%s", err, out)
	}
}
