package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"rulebook/rules"
)

// OpenExisting refuses every path where no rulebook database exists yet,
// with one line, and creates nothing; Open still creates one there.
func TestOpenExistingRefusesNoDatabase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	mustNil(t, os.WriteFile(empty, nil, 0o644))
	blank := filepath.Join(dir, "blank.db")
	makeDB(t, blank, "VACUUM")
	unbuilt := filepath.Join(dir, "unbuilt.db")
	makeDB(t, unbuilt, fmt.Sprintf("PRAGMA application_id = %d", ApplicationID))
	cases := map[string]string{
		filepath.Join(dir, "typo.db"): "no such file",
		empty:                         "the file is empty",
		blank:                         "without rulebook's tables",
		unbuilt:                       "without rulebook's tables",
	}
	before := dirEntries(t, dir)
	for path, why := range cases {
		state := fileState(t, path)
		s, err := OpenExisting(ctx, path)
		if err == nil {
			s.Close()
			t.Fatalf("OpenExisting(%s) opened it", path)
		}
		if msg := err.Error(); !errors.Is(err, ErrNoDatabase) || !strings.Contains(msg, path) || !strings.Contains(msg, why) || strings.Contains(msg, "\n") {
			t.Errorf("OpenExisting(%s): %q; want one line naming it and %q", path, msg, why)
		}
		if fileState(t, path) != state {
			t.Errorf("%s changed", path)
		}
	}
	if got := dirEntries(t, dir); !slices.Equal(got, before) {
		t.Errorf("folder held %v, now %v", before, got)
	}
	built := filepath.Join(dir, "built.db")
	s, err := Open(ctx, built)
	mustNil(t, err)
	populate(t, s)
	mustNil(t, s.Close())
	s, err = OpenExisting(ctx, built)
	mustNil(t, err)
	rs, err := s.ListRules(ctx, Filter{})
	mustNil(t, err)
	mustNil(t, s.Close())
	if len(rs) != len(sampleRules(0)) {
		t.Errorf("OpenExisting read %d rules, want %d", len(rs), len(sampleRules(0)))
	}
}

// A real bit flipped in a b-tree page of a database is found by
// quick_check at open: Open and OpenExisting refuse the file with one line
// before anything writes to it, and the file stays as it was.
func TestOpenRefusesDamagedFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "damaged.db")
	s, err := Open(ctx, path)
	mustNil(t, err)
	run, err := s.BeginRun(ctx, "generate", "{}", 0, "test")
	mustNil(t, err)
	_, err = s.InsertRules(ctx, manyRules(run, 2000))
	mustNil(t, err)
	var root, pageSize int64
	mustNil(t, s.db.QueryRow(`SELECT rootpage FROM sqlite_schema WHERE name = 'rules'`).Scan(&root))
	mustNil(t, s.db.QueryRow(`PRAGMA page_size`).Scan(&pageSize))
	mustNil(t, s.Close())

	// Byte 3 of a b-tree page is the high byte of its cell count: one bit
	// more claims 4,096 cells more than the page holds.
	flipBit(t, path, (root-1)*pageSize+3, 4)
	if report := integrityCheck(t, path); report == "ok" {
		t.Fatalf("the flipped bit did not damage the file: integrity_check says %q", report)
	}
	state := fileState(t, path)
	for name, open := range map[string]func(context.Context, string) (*Store, error){"Open": Open, "OpenExisting": OpenExisting} {
		s, err := open(ctx, path)
		if err == nil {
			s.Close()
			t.Fatalf("%s opened a damaged file", name)
		}
		t.Logf("%s: %v", name, err)
		if msg := err.Error(); !errors.Is(err, ErrDamaged) || !strings.Contains(msg, path) || !strings.Contains(msg, "quick_check") || strings.Contains(msg, "\n") {
			t.Errorf("%s: %q; want one line naming the file and quick_check", name, msg)
		}
	}
	if fileState(t, path) != state {
		t.Error("the damaged file changed")
	}
	for _, side := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(path + side); err == nil {
			t.Errorf("%s%s was created", path, side)
		}
	}
}

func flipBit(t *testing.T, path string, offset int64, bit uint) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	mustNil(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, offset)
	mustNil(t, err)
	b[0] ^= 1 << bit
	_, err = f.WriteAt(b, offset)
	mustNil(t, err)
}

// integrityCheck asks SQLite's full check on its own read-only, immutable
// connection, as sqlite3 would.
func integrityCheck(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", fileURI(path, "mode=ro", "immutable=1"))
	mustNil(t, err)
	defer db.Close()
	var report string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&report); err != nil {
		return err.Error()
	}
	return report
}

// A run whose process is gone is marked abandoned when the store is next
// opened: a pid no process has, and a pid reused by a process that started
// after the run. A run of this live process, one of another host, and one
// recorded before schema v8 (no pid) keep running.
func TestAbandonedRuns(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "r.db")
	s, err := Open(ctx, path)
	mustNil(t, err)
	live, err := s.BeginRun(ctx, "verify", "{}", 0, "test")
	mustNil(t, err)

	gone := exec.Command("true")
	mustNil(t, gone.Run())
	reused := exec.Command("sleep", "30")
	mustNil(t, reused.Start())
	defer func() { reused.Process.Kill(); reused.Wait() }()
	hourAgo := formatTime(time.Now().Add(-time.Hour))
	ids := map[string]int64{}
	for name, row := range map[string][]any{
		"gone":       {hostName(), gone.Process.Pid, formatTime(time.Now())},
		"reused":     {hostName(), reused.Process.Pid, hourAgo},
		"other host": {"elsewhere.example", 1, hourAgo},
		"before v8":  {"", 0, hourAgo},
	} {
		res, err := s.db.Exec(`INSERT INTO runs(command, config, seed, tool_version, started_at, status, host, pid)
			VALUES ('generate', '{}', 0, 'test', ?, 'running', ?, ?)`, row[2], row[0], row[1])
		mustNil(t, err)
		ids[name], _ = res.LastInsertId()
	}
	mustNil(t, s.Close())

	s, err = OpenExisting(ctx, path)
	mustNil(t, err)
	defer s.Close()
	runs, err := s.Runs(ctx)
	mustNil(t, err)
	status := map[int64]string{}
	for _, r := range runs {
		status[r.ID] = r.Status
	}
	want := map[int64]string{live: RunRunning, ids["gone"]: RunAbandoned, ids["reused"]: RunAbandoned, ids["other host"]: RunRunning, ids["before v8"]: RunRunning}
	for id, w := range want {
		if status[id] != w {
			t.Errorf("run %d is %s, want %s", id, status[id], w)
		}
	}
	st, err := s.Stats(ctx)
	mustNil(t, err)
	if st.RunsByStatus[RunAbandoned] != 2 {
		t.Errorf("stats count %d abandoned runs, want 2", st.RunsByStatus[RunAbandoned])
	}
}

// A run waits for an earlier run of the same command while that one's
// process lives, hears which one it waits for, and stops waiting when it
// ends; an abandoned one is not waited for, and Ctrl-C ends the wait.
func TestAwaitEarlierRuns(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	first, err := s.BeginRun(ctx, "verify", "{}", 0, "test")
	mustNil(t, err)
	second, err := s.BeginRun(ctx, "verify", "{}", 0, "test")
	mustNil(t, err)
	if err := s.AwaitEarlierRuns(ctx, first, "verify", nil); err != nil {
		t.Fatalf("the first run waited: %v", err)
	}
	var heard []int64
	done := make(chan error, 1)
	go func() { done <- s.AwaitEarlierRuns(ctx, second, "verify", func(r Run) { heard = append(heard, r.ID) }) }()
	select {
	case err := <-done:
		t.Fatalf("the second run did not wait: %v", err)
	case <-time.After(3 * pollInterval):
	}
	mustNil(t, s.FinishRun(ctx, Run{ID: first, Status: RunDone}))
	select {
	case err := <-done:
		mustNil(t, err)
	case <-time.After(10 * pollInterval):
		t.Fatal("the second run still waits after the first finished")
	}
	if !slices.Equal(heard, []int64{first}) {
		t.Errorf("heard of runs %v, want [%d] once", heard, first)
	}

	// A run of a process that is gone is marked abandoned, not waited for.
	gone := exec.Command("true")
	mustNil(t, gone.Run())
	_, err = s.db.Exec(`UPDATE runs SET pid = ? WHERE id = ?`, gone.Process.Pid, second)
	mustNil(t, err)
	third, err := s.BeginRun(ctx, "verify", "{}", 0, "test")
	mustNil(t, err)
	if err := s.AwaitEarlierRuns(ctx, third, "verify", nil); err != nil {
		t.Fatalf("waited for a run whose process is gone: %v", err)
	}
	fourth, err := s.BeginRun(ctx, "verify", "{}", 0, "test")
	mustNil(t, err)
	cancelled, cancel := context.WithTimeout(ctx, 2*pollInterval)
	defer cancel()
	if err := s.AwaitEarlierRuns(cancelled, fourth, "verify", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a cancelled wait returned %v", err)
	}
}

// Release counts a rule as proved only through its latest proof, when that
// proof's claim matches the rule's current text and shapes: a rule whose
// text, shapes or proof status was edited with SQL, and a rule whose
// status was set to proved with SQL, are left out, and verify lists the
// edited ones again.
func TestReleaseTrustsOnlyClaims(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	run, err := s.BeginRun(ctx, "generate", "{}", 0, "test")
	mustNil(t, err)
	_, err = s.InsertRules(ctx, manyRules(run, 6))
	mustNil(t, err)
	all, err := s.ListRules(ctx, Filter{})
	mustNil(t, err)
	set := AxiomSet{Hash: "00112233aabbccdd", Dir: "axioms", Axioms: 1, Text: "a\t\t(forall ...)\n"}
	mustNil(t, s.SaveAxiomSet(ctx, set))
	var proofs []Proof
	for _, r := range all[:5] {
		proofs = append(proofs, Proof{RuleID: r.ID, Text: r.Text, RunID: run, AxiomSet: set.Hash, Status: rules.StatusProved, Solver: "Z3 test", Budget: 1000})
	}
	mustNil(t, s.RecordProofs(ctx, proofs))
	if todo, err := s.RulesToVerify(ctx, set.Hash, "Z3 test", 1000, false); err != nil || len(todo) != 1 || todo[0].ID != all[5].ID {
		t.Fatalf("before the edits, rules to verify %v (%v); want only rule %d", ruleIDs(todo), err, all[5].ID)
	}
	edits := map[string]string{
		"text":         `UPDATE rules SET dst = '(relu ?a)' WHERE id = ?`,
		"shapes":       `UPDATE rules SET inputs = '?a:8x8 ?b:8x8' WHERE id = ?`,
		"proof status": `UPDATE proofs SET status = 'proved', claim = '' WHERE rule_id = ?`,
		"rule status":  `UPDATE rules SET status = 'proved' WHERE id = ?`,
	}
	edited := map[string]int64{"text": all[0].ID, "shapes": all[1].ID, "proof status": all[2].ID, "rule status": all[5].ID}
	for what, stmt := range edits {
		_, err := s.db.Exec(stmt, edited[what])
		mustNil(t, err)
	}
	v, leftOut, err := s.Release(ctx, "v1", "test", trustCandidates(t, s))
	mustNil(t, err)
	want := []int64{all[3].ID, all[4].ID}
	_, texts, err := s.LoadVersion(ctx, "v1")
	mustNil(t, err)
	if v.Rules != len(want) || len(texts) != len(want) {
		t.Errorf("released %d rules, want %d (rules %v)", v.Rules, len(want), want)
	}
	wantLeft := []int64{all[0].ID, all[1].ID, all[2].ID, all[5].ID}
	slices.Sort(leftOut)
	if !slices.Equal(leftOut, wantLeft) {
		t.Errorf("left out %v, want %v", leftOut, wantLeft)
	}
	todo, err := s.RulesToVerify(ctx, set.Hash, "Z3 test", 1000, false)
	mustNil(t, err)
	if got := ruleIDs(todo); !slices.Equal(got, wantLeft) {
		t.Errorf("rules to verify after the edits: %v, want %v", got, wantLeft)
	}
	runs, err := s.Runs(ctx)
	mustNil(t, err)
	last := runs[len(runs)-1]
	if last.Command != "release" || last.Status != RunDone || last.Stored != 2 || last.Candidates != 6 || !strings.Contains(last.Config, `"tag":"v1"`) {
		t.Errorf("the release's run: %+v", last)
	}
}

func ruleIDs(rs []Rule) []int64 {
	var ids []int64
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return ids
}

// The verdict of an axiom set's check is cached per set; a set that was
// never saved cannot take one, nor can a verdict that is none of the three.
func TestAxiomCheckCache(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	set := AxiomSet{Hash: "00112233aabbccdd", Dir: "axioms", Axioms: 2, Text: "a\t\t(forall ...)\n"}
	mustNil(t, s.SaveAxiomSet(ctx, set))
	if v, d, err := s.AxiomCheck(ctx, set.Hash); err != nil || v != "" || d != "" {
		t.Errorf("a new set: %q %q %v", v, d, err)
	}
	mustNil(t, s.RecordAxiomCheck(ctx, set.Hash, AxiomsInconsistent, "a, b"))
	if v, d, err := s.AxiomCheck(ctx, set.Hash); err != nil || v != AxiomsInconsistent || d != "a, b" {
		t.Errorf("after recording: %q %q %v", v, d, err)
	}
	if err := s.RecordAxiomCheck(ctx, "ffffffffffffffff", AxiomsSound, ""); err == nil {
		t.Error("a verdict for an unsaved set was accepted")
	}
	if err := s.RecordAxiomCheck(ctx, set.Hash, "probably", ""); err == nil {
		t.Error("an unknown verdict was accepted")
	}
}

// A database of schema v7 with runs, rules, proofs and a version is
// migrated to v8: every row and reference is kept, runs take the new
// statuses, and the old proofs, which have no claim, are verified again
// rather than trusted by a release.
func TestMigrateFromV7(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v7.db")
	stmts := fmt.Sprintf("PRAGMA application_id = %d;", ApplicationID)
	for v := 1; v <= 7; v++ {
		stmts += migrations[v] + fmt.Sprintf(";PRAGMA user_version = %d;", v)
	}
	stmts += `INSERT INTO meta(key, value) VALUES ('schema_version', '7');
		INSERT INTO runs(id, command, config, seed, tool_version, started_at, status) VALUES (1, 'generate', '{}', 0, 'old', '2026-01-01T00:00:00.000Z', 'done');
		INSERT INTO rules(id, hash, src, dst, inputs, constants, src_ops, dst_ops, num_inputs, num_outputs, fingerprint, status, run_id, created_at)
			VALUES (1, '00000000000000a1', '(ewadd ?a ?b)', '(ewadd ?b ?a)', '?a:4x4 ?b:4x4', '', 1, 1, 2, 1, 0, 'proved', 1, '2026-01-01T00:00:00.000Z');
		INSERT INTO axiom_sets(hash, dir, axioms, text, created_at) VALUES ('00112233aabbccdd', 'axioms', 1, '', '2026-01-01T00:00:00.000Z');
		INSERT INTO proofs(rule_id, run_id, axiom_set, status, reason, core, elapsed_ms, solver, budget, units, created_at)
			VALUES (1, 1, '00112233aabbccdd', 'proved', '', '[]', 1, 'Z3 test', 1000, 10, '2026-01-01T00:00:00.000Z');
		INSERT INTO versions(id, tag, hash, rules, axiom_sets, operators, generator, parent_id, created_at)
			VALUES (1, 'v1', '` + ContentHash([]string{"(ewadd ?a ?b) => (ewadd ?b ?a)"}) + `', 1, '[]', '[]', '[]', NULL, '2026-01-01T00:00:00.000Z');
		INSERT INTO version_rules(version_id, rule_id) VALUES (1, 1)`
	raw, err := sql.Open("sqlite", path)
	mustNil(t, err)
	_, err = raw.Exec(stmts) // whole: the triggers hold semicolons
	mustNil(t, err)
	mustNil(t, raw.Close())

	s, err := OpenExisting(ctx, path)
	mustNil(t, err)
	defer s.Close()
	var version int
	mustNil(t, s.db.QueryRow("PRAGMA user_version").Scan(&version))
	if version != SchemaVersion {
		t.Fatalf("user_version %d after opening, want %d", version, SchemaVersion)
	}
	runs, err := s.Runs(ctx)
	mustNil(t, err)
	if len(runs) != 1 || runs[0].Command != "generate" || runs[0].ToolVersion != "old" || runs[0].PID != 0 {
		t.Errorf("runs after migration: %+v", runs)
	}
	if _, texts, err := s.LoadVersion(ctx, "v1"); err != nil || len(texts) != 1 {
		t.Errorf("v1 after migration: %v, %v", texts, err)
	}
	if todo, err := s.RulesToVerify(ctx, "00112233aabbccdd", "Z3 test", 1000, false); err != nil || len(todo) != 1 {
		t.Errorf("a proof without a claim is trusted: rules to verify %v, %v", ruleIDs(todo), err)
	}
	if _, leftOut, err := s.Release(ctx, "v2", "test", trustCandidates(t, s)); err == nil || !slices.Equal(leftOut, []int64{1}) {
		t.Errorf("release after migration: left out %v, %v; want rule 1 left out and nothing to release", leftOut, err)
	}
	var fkOn int
	mustNil(t, s.db.QueryRow("PRAGMA foreign_keys").Scan(&fkOn))
	if fkOn != 1 {
		t.Error("foreign keys are off after the migration")
	}
	if _, err := s.db.Exec(`INSERT INTO rules(hash, src, dst, inputs, constants, src_ops, dst_ops, num_inputs, num_outputs, fingerprint, status, run_id, created_at)
		VALUES ('00000000000000b2', 'x', 'y', '', '', 1, 1, 1, 1, 0, 'candidate', 99, 'now')`); err == nil {
		t.Error("a rule of a missing run was accepted: the rebuilt runs table lost its references")
	}
}
