package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"rulebook/rules"
)

func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "rulebook.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// trustCandidates re-establishes every release candidate as it stands:
// the store proves nothing itself, so its tests stand in for the prover
// (verify.Release runs it).
func trustCandidates(t *testing.T, s *Store) Reestablished {
	t.Helper()
	cands, _, err := s.ReleaseCandidates(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	re := Reestablished{}
	for _, c := range cands {
		re[c.Rule.ID] = c.Claim()
	}
	return re
}

// sampleRules returns a small, varied set of rules found by run.
func sampleRules(run int64) []Rule {
	return []Rule{
		{Hash: "0123456789abcdef", Text: rules.Text{Src: "(matmul (matmul ?a ?b) ?c)", Dst: "(matmul ?a (matmul ?b ?c))", Inputs: "?a:2x4 ?b:4x4 ?c:4x4"}, SrcOps: 2, DstOps: 2, NumInputs: 3, NumOutputs: 1,
			Operators: []string{"matmul"}, Fingerprint: 1<<63 + 5, RunID: run},
		{Hash: "00000000000000a1", Text: rules.Text{Src: "(add ?a ?b)", Dst: "(add ?b ?a)", Inputs: "?a:4x4 ?b:4x4"}, SrcOps: 1, DstOps: 1, NumInputs: 2, NumOutputs: 1,
			Operators: []string{"add"}, Fingerprint: 42, Status: rules.StatusProved, RunID: run},
		{Hash: "00000000000000a2", Text: rules.Text{Src: "(matmul ?a (add ?b ?c))", Dst: "(add (matmul ?a ?b) (matmul ?a ?c))", Inputs: "?a:4x4 ?b:4x4 ?c:4x4"}, SrcOps: 2, DstOps: 3, NumInputs: 3, NumOutputs: 1,
			Operators: []string{"add", "matmul"}, Fingerprint: 7, RunID: run},
		{Hash: "00000000000000a3", Text: rules.Text{Src: "(let ((x (matmul ?a ?b)) (y (matmul ?a ?c))) (x y))", Dst: "(split 1 (matmul ?a (concat 1 ?b ?c)))", Inputs: "?a:4x4 ?b:4x4 ?c:4x4", Constants: ""},
			SrcOps: 2, DstOps: 3, NumInputs: 3, NumOutputs: 2,
			Operators: []string{"concat", "matmul", "split"}, Fingerprint: 9, RunID: run},
		{Hash: "00000000000000a4", Text: rules.Text{Src: "(relu (relu ?a))", Dst: "(relu ?a)", Inputs: "?a:4x4"},
			SrcOps: 2, DstOps: 1, NumInputs: 1, NumOutputs: 1, Operators: []string{"relu"},
			Fingerprint: 11, Status: rules.StatusRefuted, RunID: run},
		{Hash: "00000000000000a5", Text: rules.Text{Src: "(ewmul ?a #c)", Dst: "(ewmul #c ?a)", Inputs: "?a:4x4", Constants: "4x4"},
			SrcOps: 1, DstOps: 1, NumInputs: 1, NumOutputs: 1, Operators: []string{"ewmul"},
			Fingerprint: 13, RunID: run},
	}
}

func populate(t *testing.T, s *Store) (int64, []Rule) {
	t.Helper()
	ctx := context.Background()
	run, err := s.BeginRun(ctx, "generate", `{"max_ops":3}`, 1, "test")
	if err != nil {
		t.Fatal(err)
	}
	rules := sampleRules(run)
	n, err := s.InsertRules(ctx, rules)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(rules)) {
		t.Fatalf("InsertRules: %d new, want %d", n, len(rules))
	}
	if err := s.FinishRun(ctx, Run{ID: run, Status: RunDone, Graphs: 100, Classes: 50, Candidates: 6, Stored: n}); err != nil {
		t.Fatal(err)
	}
	return run, rules
}

// populateProofs verifies the sample rules against a sample axiom set: the
// first proved, the second unknown.
func populateProofs(t *testing.T, s *Store, run int64, rules []Rule) {
	t.Helper()
	ctx := context.Background()
	set := AxiomSet{Hash: "00112233aabbccdd", Dir: "axioms", Axioms: 2, Text: "ewadd-comm\tewadd is commutative\t(forall ...)\n"}
	if err := s.SaveAxiomSet(ctx, set); err != nil {
		t.Fatal(err)
	}
	ids, err := s.ListRules(ctx, Filter{})
	if err != nil || len(ids) < 2 {
		t.Fatalf("rules: %v", err)
	}
	err = s.RecordProofs(ctx, []Proof{
		{RuleID: ids[0].ID, Text: ids[0].Text, RunID: run, AxiomSet: set.Hash, Status: "proved", Core: []string{"ewadd-comm"}, Elapsed: 3 * time.Millisecond, Solver: "Z3 test", Budget: 1000, Units: 420},
		{RuleID: ids[1].ID, Text: ids[1].Text, RunID: run, AxiomSet: set.Hash, Status: "unknown", Reason: "budget", Elapsed: time.Second, Solver: "Z3 test", Budget: 1000, Units: 1000},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Release(ctx, "v1", "test", trustCandidates(t, s)); err != nil {
		t.Fatal(err)
	}
}

// populatePruningAndOrigins prunes the third sample rule in favour of the
// first, and imports the first two again from a file.
func populatePruningAndOrigins(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	all, err := s.ListRules(ctx, Filter{})
	if err != nil || len(all) < 3 {
		t.Fatalf("rules: %v", err)
	}
	mustNil(t, s.SetPruning(ctx, []Pruning{{Rule: all[2].ID, By: all[0].ID, Reason: "renaming"}}))
	run, err := s.BeginRun(ctx, "import", `{"file":"taso.pb","format":"taso-pb"}`, 0, "test")
	mustNil(t, err)
	again := []Rule{all[0], all[1]}
	for i := range again {
		again[i].RunID, again[i].Origin = run, fmt.Sprintf("rule %d", i+1)
	}
	n, err := s.InsertRules(ctx, again)
	mustNil(t, err)
	if n != 0 {
		t.Errorf("re-import added %d rules", n)
	}
	mustNil(t, s.FinishRun(ctx, Run{ID: run, Status: RunDone}))
}

func TestPruningAndOrigins(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	populate(t, s)
	populatePruningAndOrigins(t, s)
	all, err := s.ListRules(ctx, Filter{})
	mustNil(t, err)
	if all[2].PrunedBy != all[0].ID || all[2].PruneReason != "renaming" {
		t.Errorf("rule 3 pruned by %d (%q)", all[2].PrunedBy, all[2].PruneReason)
	}
	kept, err := s.ListRules(ctx, Filter{Unpruned: true})
	mustNil(t, err)
	if len(kept) != len(all)-1 {
		t.Errorf("%d unpruned rules of %d", len(kept), len(all))
	}
	var origins int
	mustNil(t, s.db.QueryRow("SELECT count(*) FROM rule_origins").Scan(&origins))
	if origins != 2 {
		t.Errorf("%d origins recorded, want 2 (rules already stored keep their new origin)", origins)
	}
	// Pruning is replaced whole.
	mustNil(t, s.SetPruning(ctx, nil))
	kept, err = s.ListRules(ctx, Filter{Unpruned: true})
	mustNil(t, err)
	if len(kept) != len(all) {
		t.Errorf("after clearing, %d unpruned rules of %d", len(kept), len(all))
	}
	if err := s.SetPruning(ctx, []Pruning{{Rule: all[1].ID, By: all[0].ID, Reason: "because"}}); err == nil {
		t.Error("an unknown prune reason was accepted")
	}
}

func TestProofs(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	run, rules := populate(t, s)
	populateProofs(t, s, run, rules)
	all, _ := s.ListRules(ctx, Filter{})
	todo, err := s.RulesToVerify(ctx, "00112233aabbccdd", "Z3 test", 1000, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(todo) != len(all)-2 {
		t.Errorf("%d rules left to verify, want %d", len(todo), len(all)-2)
	}
	if again, _ := s.RulesToVerify(ctx, "00112233aabbccdd", "Z3 test", 1000, true); len(again) != len(all) {
		t.Errorf("recheck lists %d rules, want %d", len(again), len(all))
	}
	if other, _ := s.RulesToVerify(ctx, "ffffffffffffffff", "Z3 test", 1000, false); len(other) != len(all) {
		t.Errorf("another axiom set lists %d rules, want %d", len(other), len(all))
	}
	if other, _ := s.RulesToVerify(ctx, "00112233aabbccdd", "Z3 test", 2000, false); len(other) != len(all) {
		t.Errorf("another budget lists %d rules, want %d", len(other), len(all))
	}
	if other, _ := s.RulesToVerify(ctx, "00112233aabbccdd", "Z3 newer", 1000, false); len(other) != len(all) {
		t.Errorf("another solver lists %d rules, want %d", len(other), len(all))
	}
	p, ok, err := s.LatestProof(ctx, all[0].ID)
	if err != nil || !ok || p.Status != "proved" || len(p.Core) != 1 || p.Core[0] != "ewadd-comm" || p.Elapsed != 3*time.Millisecond ||
		p.Budget != 1000 || p.Units != 420 || p.Prover() != "Z3 test, rlimit 1000" {
		t.Errorf("latest proof %+v ok=%v err=%v", p, ok, err)
	}
	if vs, err := s.Versions(ctx); err != nil || len(vs) != 1 || !slices.Equal(vs[0].Provers, []string{"Z3 test, rlimit 1000"}) {
		t.Errorf("versions %+v, err %v: want v1 proved under Z3 test, rlimit 1000", vs, err)
	}
	if r, _ := s.Rule(ctx, all[1].ID); r.Status != "unknown" {
		t.Errorf("rule status %s after an unknown proof", r.Status)
	}
	if _, ok, _ := s.LatestProof(ctx, all[2].ID); ok {
		t.Error("a rule never verified has a proof")
	}
	bad := []Proof{{RuleID: all[2].ID, Text: all[2].Text, RunID: run, AxiomSet: "00112233aabbccdd", Status: "proved"}, {RuleID: 999999, Text: all[2].Text, RunID: run, AxiomSet: "00112233aabbccdd", Status: "proved"}}
	if err := s.RecordProofs(ctx, bad); err == nil {
		t.Error("a proof of a missing rule was accepted")
	}
	if _, ok, _ := s.LatestProof(ctx, all[2].ID); ok {
		t.Error("a failed batch left a proof behind")
	}
}

func TestMigrationsMatchVersion(t *testing.T) {
	if len(migrations)-1 != SchemaVersion {
		t.Fatalf("%d migrations, SchemaVersion %d", len(migrations)-1, SchemaVersion)
	}
	for v := 1; v < len(migrations); v++ {
		if strings.TrimSpace(migrations[v]) == "" {
			t.Errorf("migration %d is empty", v)
		}
	}
}

func TestCreateHeader(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	var appID, version int64
	var mode, fk string
	if err := s.db.QueryRowContext(ctx, "PRAGMA application_id").Scan(&appID); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
		t.Fatal(err)
	}
	var meta string
	if err := s.db.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = 'schema_version'").Scan(&meta); err != nil {
		t.Fatal(err)
	}
	if appID != ApplicationID || version != SchemaVersion || mode != "wal" || fk != "1" || meta != fmt.Sprint(SchemaVersion) {
		t.Fatalf("application_id %#x user_version %d journal_mode %s foreign_keys %s meta %s", appID, version, mode, fk, meta)
	}
	if s.Path() == "" {
		t.Fatal("empty path")
	}
}

func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "r.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	_, rules := populate(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, side := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(path + side); err == nil {
			t.Errorf("%s left after Close", side)
		}
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.ListRules(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rules) {
		t.Fatalf("%d rules after reopen, want %d", len(got), len(rules))
	}
}

func TestOpenEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

func TestInsertAndQuery(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	run, inserted := populate(t, s)

	// Re-inserting the same rules adds nothing.
	n, err := s.InsertRules(ctx, inserted)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("re-insert: %d new rows, want 0", n)
	}
	// A batch with one new rule and a duplicate within the batch.
	extra := Rule{Hash: "00000000000000b1", Text: rules.Text{Src: "(transpose (transpose ?a))", Dst: "?a", Inputs: "?a:2x4"},
		SrcOps: 2, DstOps: 0, NumInputs: 1, NumOutputs: 1, Operators: []string{"transpose"}, RunID: run}
	n, err = s.InsertRules(ctx, []Rule{inserted[0], extra, extra})
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("mixed insert: %d new rows, want 1", n)
	}

	all, err := s.ListRules(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(inserted)+1 {
		t.Fatalf("%d rules, want %d", len(all), len(inserted)+1)
	}
	for i, r := range all[:len(inserted)] {
		want := inserted[i]
		want.ID = r.ID
		if want.Status == "" {
			want.Status = rules.StatusCandidate
		}
		if !reflect.DeepEqual(r, want) {
			t.Errorf("rule %d:\n got %+v\nwant %+v", i, r, want)
		}
		if i > 0 && r.ID <= all[i-1].ID {
			t.Errorf("not ordered by id")
		}
	}

	hashes := func(rs []Rule) []string {
		var h []string
		for _, r := range rs {
			h = append(h, r.Hash)
		}
		return h
	}
	tests := []struct {
		name string
		f    Filter
		want []string
	}{
		{"all", Filter{}, []string{"0123456789abcdef", "00000000000000a1", "00000000000000a2", "00000000000000a3", "00000000000000a4", "00000000000000a5", "00000000000000b1"}},
		{"operator matmul", Filter{Operator: "matmul"}, []string{"0123456789abcdef", "00000000000000a2", "00000000000000a3"}},
		{"operator add", Filter{Operator: "add"}, []string{"00000000000000a1", "00000000000000a2"}},
		{"operator none", Filter{Operator: "conv2d"}, nil},
		{"status proved", Filter{Status: rules.StatusProved}, []string{"00000000000000a1"}},
		{"status candidate", Filter{Status: rules.StatusCandidate}, []string{"0123456789abcdef", "00000000000000a2", "00000000000000a3", "00000000000000a5", "00000000000000b1"}},
		{"min 3", Filter{MinOps: 3}, []string{"00000000000000a2", "00000000000000a3"}},
		{"max 1", Filter{MaxOps: 1}, []string{"00000000000000a1", "00000000000000a5"}},
		{"size 2", Filter{MinOps: 2, MaxOps: 2}, []string{"0123456789abcdef", "00000000000000a4", "00000000000000b1"}},
		{"limit", Filter{Limit: 2}, []string{"0123456789abcdef", "00000000000000a1"}},
		{"combined", Filter{Operator: "matmul", MinOps: 3, Status: rules.StatusCandidate, Limit: 1}, []string{"00000000000000a2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListRules(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if h := hashes(got); !reflect.DeepEqual(h, tc.want) {
				t.Fatalf("got %v, want %v", h, tc.want)
			}
		})
	}

	// Get by id.
	r, err := s.Rule(ctx, all[3].ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r, all[3]) {
		t.Fatalf("Rule: got %+v, want %+v", r, all[3])
	}
	_, err = s.Rule(ctx, 12345)
	if err == nil || err.Error() != "rule 12345 not found" || !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("missing rule: %v", err)
	}

	// Stats.
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{
		Rules:        7,
		ByStatus:     map[string]int64{"candidate": 5, "proved": 1, "refuted": 1},
		BySize:       map[int]int64{1: 2, 2: 3, 3: 2},
		ByOperator:   map[string]int64{"add": 2, "concat": 1, "ewmul": 1, "matmul": 3, "relu": 1, "split": 1, "transpose": 1},
		Runs:         1,
		RunsByStatus: map[string]int64{"done": 1},
	}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("Stats:\n got %+v\nwant %+v", st, want)
	}
}

func TestInsertRulesRejectsBadRows(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	run, err := s.BeginRun(ctx, "generate", "{}", 0, "test")
	if err != nil {
		t.Fatal(err)
	}
	good := sampleRules(run)[0]
	tests := []struct {
		name   string
		mutate func(*Rule)
	}{
		{"short hash", func(r *Rule) { r.Hash = "abc" }},
		{"upper-case hash", func(r *Rule) { r.Hash = "0123456789ABCDEF" }},
		{"bad status", func(r *Rule) { r.Status = "maybe" }},
		{"unknown run", func(r *Rule) { r.RunID = run + 100 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := good
			tc.mutate(&bad)
			other := good
			other.Hash = "fedcba9876543210"
			if _, err := s.InsertRules(ctx, []Rule{other, bad}); err == nil {
				t.Fatal("no error")
			}
			st, err := s.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Rules != 0 {
				t.Fatalf("%d rules written by a failed insert", st.Rules)
			}
		})
	}
}

func TestInsertRulesCancelled(t *testing.T) {
	s := openTemp(t)
	run, err := s.BeginRun(context.Background(), "generate", "{}", 0, "test")
	if err != nil {
		t.Fatal(err)
	}
	rules := manyRules(run, 20000)

	t.Run("before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := s.InsertRules(ctx, rules); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
	t.Run("midway", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		// Cancel while the transaction is under way: the rule count seen by a
		// concurrent reader stays 0 and the insert fails.
		done := make(chan error, 1)
		go func() {
			_, err := s.InsertRules(ctx, rules)
			done <- err
		}()
		time.Sleep(20 * time.Millisecond)
		cancel()
		if err := <-done; err == nil {
			t.Skip("insert finished before cancellation")
		} else if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ops int64
	if err := s.db.QueryRow("SELECT count(*) FROM rule_operators").Scan(&ops); err != nil {
		t.Fatal(err)
	}
	if st.Rules != 0 || ops != 0 {
		t.Fatalf("cancelled insert wrote %d rules, %d operator rows", st.Rules, ops)
	}
}

func manyRules(run int64, n int) []Rule {
	ops := []string{"add", "matmul", "relu", "concat", "split", "transpose"}
	many := make([]Rule, n)
	for i := range many {
		many[i] = Rule{Hash: fmt.Sprintf("%016x", uint64(i)*0x9E3779B97F4A7C15),
			Text:   rules.Text{Src: fmt.Sprintf("(add ?a (relu ?b%d))", i), Dst: fmt.Sprintf("(add (relu ?b%d) ?a)", i), Inputs: "?a:4x4 ?b:4x4"},
			SrcOps: 1 + i%3, DstOps: 1 + i%4,
			NumInputs: 2, NumOutputs: 1 + i%2, Operators: []string{ops[i%6], ops[(i+1)%6]}, Fingerprint: uint64(i), RunID: run}
	}
	return many
}

func TestInsertManyRules(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	ctx := context.Background()
	s := openTemp(t)
	run, err := s.BeginRun(ctx, "generate", "{}", 0, "test")
	if err != nil {
		t.Fatal(err)
	}
	rules := manyRules(run, 100000)
	start := time.Now()
	n, err := s.InsertRules(ctx, rules)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("inserted %d rules in %v", n, time.Since(start))
	if n != int64(len(rules)) {
		t.Fatalf("%d new, want %d", n, len(rules))
	}
	got, err := s.ListRules(ctx, Filter{Operator: "split"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2*len(rules)/6 {
		t.Fatalf("%d rules use split, want %d", len(got), 2*len(rules)/6)
	}
}

func TestRuns(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	before := time.Now().Add(-time.Second)
	a, err := s.BeginRun(ctx, "generate", `{"max_ops":2}`, 1<<63+1, "v0.1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.BeginRun(ctx, "import", `{}`, 7, "v0.1")
	if err != nil {
		t.Fatal(err)
	}
	end := time.Date(2030, 1, 2, 3, 4, 5, 6e6, time.UTC)
	if err := s.FinishRun(ctx, Run{ID: a, Status: RunInterrupted, FinishedAt: &end, Graphs: 10, Classes: 9, Collisions: 1, Candidates: 3, Stored: 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(ctx, Run{ID: 99, Status: RunDone}); err == nil || !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("finish unknown run: %v", err)
	}
	if err := s.FinishRun(ctx, Run{ID: b, Status: "bogus"}); err == nil {
		t.Fatal("finish with bad status: no error")
	}
	runs, err := s.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].ID != a || runs[1].ID != b {
		t.Fatalf("runs %+v", runs)
	}
	r := runs[0]
	if r.Command != "generate" || r.Config != `{"max_ops":2}` || r.Seed != 1<<63+1 || r.ToolVersion != "v0.1" ||
		r.Status != RunInterrupted || r.FinishedAt == nil || !r.FinishedAt.Equal(end) ||
		r.Graphs != 10 || r.Classes != 9 || r.Collisions != 1 || r.Candidates != 3 || r.Stored != 2 {
		t.Fatalf("run a = %+v", r)
	}
	if r.StartedAt.Before(before) || r.StartedAt.After(time.Now()) {
		t.Fatalf("started at %v", r.StartedAt)
	}
	if runs[1].Status != RunRunning || runs[1].FinishedAt != nil {
		t.Fatalf("run b = %+v", runs[1])
	}
}

func fileState(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		return "missing"
	}
	if fi.IsDir() {
		return "dir"
	}
	data, err := os.ReadFile(path)
	if err != nil { // unreadable: compare what stat shows
		return fmt.Sprintf("unreadable %d %v %v", fi.Size(), fi.Mode(), fi.ModTime())
	}
	return fmt.Sprintf("%x %v %v", sha256.Sum256(data), fi.Mode(), fi.ModTime())
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		setup   func(t *testing.T, path string) // creates the file at path
		path    func(dir string) string
		want    string // regexp; PATH stands for the quoted path
		wantErr error
	}{
		{
			name:  "directory",
			setup: func(t *testing.T, path string) { mustNil(t, os.Mkdir(path, 0o755)) },
			want:  `^store: cannot open PATH: is a directory$`,
		},
		{
			name: "missing directory",
			path: func(dir string) string { return filepath.Join(dir, "nope", "rulebook.db") },
			want: `^store: cannot create PATH: no such file or directory$`,
		},
		{
			name: "unreadable",
			setup: func(t *testing.T, path string) {
				if os.Geteuid() == 0 {
					t.Skip("root reads any file")
				}
				mustNil(t, os.WriteFile(path, []byte("SQLite format 3\x00"), 0o000))
			},
			want: `^store: cannot read PATH: permission denied$`,
		},
		{
			name:    "text file",
			setup:   func(t *testing.T, path string) { mustNil(t, os.WriteFile(path, []byte("hello"), 0o644)) },
			want:    `^PATH is not a rulebook database: not an SQLite file$`,
			wantErr: ErrNotRulebook,
		},
		{
			name: "long text file",
			setup: func(t *testing.T, path string) {
				mustNil(t, os.WriteFile(path, []byte(strings.Repeat("hello world\n", 1000)), 0o644))
			},
			want:    `^PATH is not a rulebook database: not an SQLite file$`,
			wantErr: ErrNotRulebook,
		},
		{
			name: "foreign sqlite",
			setup: func(t *testing.T, path string) {
				makeDB(t, path, "CREATE TABLE t(x INTEGER); INSERT INTO t VALUES (1)")
			},
			want:    `^PATH is not a rulebook database \(application id 0x00000000\)$`,
			wantErr: ErrNotRulebook,
		},
		{
			name: "foreign sqlite in WAL mode",
			setup: func(t *testing.T, path string) {
				makeDB(t, path, "PRAGMA journal_mode = WAL; CREATE TABLE t(x INTEGER)")
			},
			want:    `^PATH is not a rulebook database \(application id 0x00000000\)$`,
			wantErr: ErrNotRulebook,
		},
		{
			name: "other application id",
			setup: func(t *testing.T, path string) {
				makeDB(t, path, "PRAGMA application_id = 1234; CREATE TABLE t(x INTEGER)")
			},
			want:    `^PATH is not a rulebook database \(application id 0x000004D2\)$`,
			wantErr: ErrNotRulebook,
		},
		{
			name: "newer schema",
			setup: func(t *testing.T, path string) {
				makeDB(t, path, fmt.Sprintf("PRAGMA application_id = %d; PRAGMA user_version = %d; CREATE TABLE future(x INTEGER)",
					ApplicationID, SchemaVersion+1))
			},
			want:    fmt.Sprintf(`^PATH was written by a newer rulebook \(schema v%d\); this build reads up to v%d$`, SchemaVersion+1, SchemaVersion),
			wantErr: ErrNewerSchema,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "rulebook.db")
			if tc.path != nil {
				path = tc.path(dir)
			}
			if tc.setup != nil {
				tc.setup(t, path)
			}
			before := fileState(t, path)
			entries := dirEntries(t, dir)

			s, err := Open(ctx, path)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			re := regexp.MustCompile(strings.ReplaceAll(tc.want, "PATH", regexp.QuoteMeta(path)))
			if !re.MatchString(err.Error()) {
				t.Errorf("error %q does not match %s", err, re)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v is not %v", err, tc.wantErr)
			}
			if after := fileState(t, path); after != before {
				t.Errorf("file changed: %s -> %s", before, after)
			}
			if got := dirEntries(t, dir); !reflect.DeepEqual(got, entries) {
				t.Errorf("directory changed: %v -> %v", entries, got)
			}
		})
	}
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// makeDB creates an SQLite file at path by running stmts, and closes it.
func makeDB(t *testing.T, path, stmts string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range strings.Split(stmts, ";") {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, side := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(path + side); err == nil {
			t.Fatalf("%s%s left behind by setup", path, side)
		}
	}
}

// TestOpenForeignWALInUse refuses a foreign WAL-mode database while another
// connection holds it open (so its -wal file exists), without changing it.
func TestOpenForeignWALInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	makeDB(t, path, "PRAGMA journal_mode = WAL; CREATE TABLE t(x INTEGER); INSERT INTO t VALUES (1)")
	other, err := sql.Open("sqlite", path)
	mustNil(t, err)
	defer other.Close()
	mustNil(t, other.QueryRow("SELECT count(*) FROM t").Scan(new(int)))
	_, err = other.Exec("INSERT INTO t VALUES (2)") // lives in the -wal file
	mustNil(t, err)
	before := fileState(t, path)
	wal := fileState(t, path+"-wal")
	_, err = Open(context.Background(), path)
	if !errors.Is(err, ErrNotRulebook) {
		t.Fatalf("err = %v, want ErrNotRulebook", err)
	}
	if fileState(t, path) != before || fileState(t, path+"-wal") != wal {
		t.Fatal("foreign database changed")
	}
}

// TestOpenConcurrentCreate opens a new file from several goroutines at once
// (each with its own connection pool, like separate processes).
func TestOpenConcurrentCreate(t *testing.T) {
	for range 5 {
		path := filepath.Join(t.TempDir(), "c.db")
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				s, err := Open(context.Background(), path)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := s.Stats(context.Background()); err != nil {
					t.Error(err)
				}
				s.Close()
			})
		}
		wg.Wait()
	}
}

func TestOpenEmptySQLiteFile(t *testing.T) {
	// An SQLite file with no tables and no application id is adopted.
	path := filepath.Join(t.TempDir(), "blank.db")
	makeDB(t, path, "VACUUM")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

func TestOpenMigratesOlder(t *testing.T) {
	// A rulebook file at user_version 0 (application id set, no schema yet)
	// is brought to SchemaVersion.
	path := filepath.Join(t.TempDir(), "old.db")
	makeDB(t, path, fmt.Sprintf("PRAGMA application_id = %d", ApplicationID))
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var v int
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != SchemaVersion {
		t.Fatalf("user_version %d", v)
	}
}

func TestOpenPathWithURICharacters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "we?ird#na%me.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

// TestSchemaDocCoversSchema checks that every table, view and column of the
// schema is mentioned in docs/schema.md.
func TestSchemaDocCoversSchema(t *testing.T) {
	doc, err := os.ReadFile("../docs/schema.md")
	if err != nil {
		t.Fatal(err)
	}
	s := openTemp(t)
	rows, err := s.db.Query("SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		mustNil(t, rows.Scan(&n))
		names = append(names, n)
	}
	mustNil(t, rows.Err())
	rows.Close()
	for _, name := range names {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("%s is not documented", name)
		}
		cols, err := s.db.Query("SELECT name FROM pragma_table_info(?)", name)
		if err != nil {
			t.Fatal(err)
		}
		for cols.Next() {
			var c string
			mustNil(t, cols.Scan(&c))
			if !strings.Contains(string(doc), "`"+c+"`") && !strings.Contains(string(doc), c+",") && !strings.Contains(string(doc), ", "+c) {
				t.Errorf("%s.%s is not documented", name, c)
			}
		}
		mustNil(t, cols.Err())
		cols.Close()
	}
}

func TestOpCosts(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	run, err := s.BeginRun(ctx, "bench-ops", `{"model":"m.onnx"}`, 0, "test")
	mustNil(t, err)
	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	conv := OpCost{Device: "cpu", Operator: "Conv", Shapes: "1x3x8x8,4x3x3x3 -> 1x4x8x8", Params: "group=1", Median: 1500 * time.Microsecond, Repeats: 5, RunID: run, MeasuredAt: at}
	relu := OpCost{Device: "cpu", Operator: "Relu", Shapes: "1x4x8x8 -> 1x4x8x8", Median: 20 * time.Microsecond, Repeats: 5, RunID: run, MeasuredAt: at}
	mustNil(t, s.RecordCosts(ctx, []OpCost{conv, relu}))
	conv.Median = 1200 * time.Microsecond // a new measurement replaces the old
	mustNil(t, s.RecordCosts(ctx, []OpCost{conv}))
	got, ok, err := s.Cost(ctx, "cpu", "Conv", conv.Shapes, "group=1")
	mustNil(t, err)
	if !ok || got != conv {
		t.Errorf("Cost = %+v, %v; want %+v", got, ok, conv)
	}
	if _, ok, err := s.Cost(ctx, "cuda", "Conv", conv.Shapes, "group=1"); ok || err != nil {
		t.Errorf("a cost on another device: %v %v", ok, err)
	}
	all, err := s.Costs(ctx, "cpu")
	mustNil(t, err)
	if len(all) != 2 || all[0].Operator != "Conv" || all[1] != relu {
		t.Errorf("Costs = %+v", all)
	}
	if err := s.RecordCosts(ctx, []OpCost{{Device: "cpu", Operator: "Relu", Median: -time.Second, Repeats: 1, RunID: run, MeasuredAt: at}}); err == nil {
		t.Error("a negative time was stored")
	}
}
