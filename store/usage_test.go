package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const (
	hashV1 = "1111111111111111111111111111111111111111111111111111111111111111"
	hashV2 = "2222222222222222222222222222222222222222222222222222222222222222"
	commAB = "(ewadd ?a ?b) => (ewadd ?b ?a)"
	fuseMM = "(matmul ?a (concat 1 ?b ?c)) => (concat 1 (matmul ?a ?b) (matmul ?a ?c))"
	reluRL = "(relu (relu ?a)) => (relu ?a)"
)

// beginOptimizeRun starts the run that optimizations are recorded under.
func beginOptimizeRun(t *testing.T, s *Store) int64 {
	t.Helper()
	run, err := s.BeginRun(context.Background(), "optimize", `{"model":"m.onnx"}`, 0, "test")
	mustNil(t, err)
	return run
}

// sampleOptimization is an analytic optimization of model under version v1
// at minute min of a fixed day.
func sampleOptimization(run int64, model string, min int, uses ...RuleUse) Optimization {
	return Optimization{RunID: run, Model: model, VersionTag: "v1", VersionHash: hashV1, CostModel: "analytic",
		Before: 10, After: 8, Explored: 100, Seen: 400, Seconds: 1.5, Stopped: "queue empty",
		At: time.Date(2026, 11, 21, 12, min, 0, 0, time.UTC), Uses: uses}
}

// populateOptimizations records two models optimized with v1, one of them
// twice (from two directories, so the later counts win), and one with v2.
func populateOptimizations(t *testing.T, s *Store, run int64) {
	t.Helper()
	ctx := context.Background()
	bert := sampleOptimization(run, "models/bert.onnx", 3, RuleUse{fuseMM, 2})
	bert.VersionTag, bert.VersionHash, bert.CostModel, bert.After = "v2", hashV2, "measured", 6
	for _, o := range []Optimization{
		sampleOptimization(run, "/old/resnet50.onnx", 0, RuleUse{commAB, 9}),
		sampleOptimization(run, "/new/resnet50.onnx", 1, RuleUse{commAB, 4}, RuleUse{reluRL, 1}),
		sampleOptimization(run, `C:\models\squeezenet.onnx`, 2, RuleUse{commAB, 2}, RuleUse{fuseMM, 5}),
		bert,
	} {
		_, err := s.RecordOptimization(ctx, o)
		mustNil(t, err)
	}
}

func TestRecordOptimization(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	run := beginOptimizeRun(t, s)
	o := sampleOptimization(run, "m.onnx", 0, RuleUse{commAB, 2}, RuleUse{reluRL, 0}, RuleUse{commAB, 3})
	o.At = time.Time{}
	before := time.Now().Add(-time.Second)
	id, err := s.RecordOptimization(ctx, o)
	mustNil(t, err)
	var at string
	var explored int
	mustNil(t, s.db.QueryRowContext(ctx, `SELECT optimized_at, explored FROM optimizations WHERE id = ?`, id).Scan(&at, &explored))
	if got, err := time.Parse(timeFormat, at); err != nil || got.Before(before) || explored != 100 {
		t.Errorf("optimized_at %q (%v), explored %d: want now and 100", at, err, explored)
	}
	uses, err := s.ruleUses(ctx, id)
	mustNil(t, err)
	if want := []RuleUse{{commAB, 5}}; !reflect.DeepEqual(uses, want) {
		t.Errorf("rule uses %+v, want %+v (zero counts dropped, repeats summed)", uses, want)
	}
}

// TestRecordOptimizationRejects checks that a bad optimization is refused
// whole: neither it nor any of its rule uses is left behind.
func TestRecordOptimizationRejects(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	run := beginOptimizeRun(t, s)
	cases := []struct {
		name   string
		change func(*Optimization)
		want   string
	}{
		{"unknown cost model", func(o *Optimization) { o.CostModel = "guessed" }, "CHECK constraint"},
		{"negative count", func(o *Optimization) { o.Uses = append(o.Uses, RuleUse{reluRL, -1}) }, reluRL},
		{"unknown run", func(o *Optimization) { o.RunID = run + 100 }, "FOREIGN KEY"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := sampleOptimization(run, "m.onnx", 0, RuleUse{commAB, 1})
			c.change(&o)
			_, err := s.RecordOptimization(ctx, o)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "store: record optimization of m.onnx: ") {
				t.Errorf("err = %v, want one about %q", err, c.want)
			}
			if n := countRows(t, s, "optimizations") + countRows(t, s, "rule_uses"); n != 0 {
				t.Errorf("%d rows left behind", n)
			}
		})
	}
}

func countRows(t *testing.T, s *Store, table string) int {
	t.Helper()
	var n int
	mustNil(t, s.db.QueryRow("SELECT count(*) FROM "+table).Scan(&n))
	return n
}

func TestUsage(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	populateOptimizations(t, s, beginOptimizeRun(t, s))
	cases := []struct {
		name, hash string
		want       []Usage
	}{
		{"all versions", "", []Usage{
			{commAB, "resnet50.onnx", 4}, {commAB, "squeezenet.onnx", 2},
			{fuseMM, "bert.onnx", 2}, {fuseMM, "squeezenet.onnx", 5},
			{reluRL, "resnet50.onnx", 1},
		}},
		{"v1", hashV1, []Usage{
			{commAB, "resnet50.onnx", 4}, {commAB, "squeezenet.onnx", 2},
			{fuseMM, "squeezenet.onnx", 5}, {reluRL, "resnet50.onnx", 1},
		}},
		{"v2", hashV2, []Usage{{fuseMM, "bert.onnx", 2}}},
		{"never used", strings.Repeat("3", 64), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.Usage(ctx, c.hash)
			mustNil(t, err)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Usage(%.8s) =\n%+v\nwant\n%+v", c.hash, got, c.want)
			}
		})
	}
}

// TestUsageLatestByTime checks that the latest optimization is the one
// optimized last, not the one recorded last.
func TestUsageLatestByTime(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	run := beginOptimizeRun(t, s)
	for _, o := range []Optimization{
		sampleOptimization(run, "m.onnx", 5, RuleUse{commAB, 7}),
		sampleOptimization(run, "m.onnx", 1, RuleUse{commAB, 1}),
	} {
		_, err := s.RecordOptimization(ctx, o)
		mustNil(t, err)
	}
	got, err := s.Usage(ctx, "")
	mustNil(t, err)
	if want := []Usage{{commAB, "m.onnx", 7}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Usage = %+v, want %+v", got, want)
	}
}

func TestBaseName(t *testing.T) {
	for path, want := range map[string]string{
		"resnet50.onnx": "resnet50.onnx", "../shared/models/resnet50.onnx": "resnet50.onnx",
		`C:\models\bert.onnx`: "bert.onnx", "/": "",
	} {
		if got := baseName(path); got != want {
			t.Errorf("baseName(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestMigrateFromV5 opens a file written by schema v5, with a run and a
// measured cost, and checks that steps 6 and 7 keep them and add the tables
// and columns.
func TestMigrateFromV5(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v5.db")
	makeV5(t, path)
	s, err := Open(ctx, path)
	mustNil(t, err)
	defer s.Close()
	var version int
	mustNil(t, s.db.QueryRow("PRAGMA user_version").Scan(&version))
	if version != SchemaVersion {
		t.Fatalf("user_version %d after migration, want %d", version, SchemaVersion)
	}
	var budgets int
	mustNil(t, s.db.QueryRow("SELECT count(*) FROM pragma_table_info('proofs') WHERE name IN ('budget', 'units')").Scan(&budgets))
	if budgets != 2 {
		t.Errorf("proofs has %d of the columns budget and units after migration", budgets)
	}
	if _, ok, err := s.Cost(ctx, "cpu/1", "Relu", "4 -> 4", ""); !ok || err != nil {
		t.Errorf("the v5 cost was lost: %v %v", ok, err)
	}
	if _, err := s.RecordOptimization(ctx, sampleOptimization(1, "m.onnx", 0, RuleUse{commAB, 1})); err != nil {
		t.Errorf("recording under the v5 run: %v", err)
	}
}

// makeV5 writes a rulebook file at schema v5 the way a v5 build left it.
func makeV5(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	mustNil(t, err)
	defer db.Close()
	stmts := []string{fmt.Sprintf("PRAGMA application_id = %d", ApplicationID)}
	for v := 1; v <= 5; v++ {
		stmts = append(stmts, migrations[v])
	}
	stmts = append(stmts, "PRAGMA user_version = 5",
		`INSERT INTO meta(key, value) VALUES ('schema_version', '5')`,
		`INSERT INTO runs(command, config, seed, tool_version, started_at, status) VALUES ('bench-ops', '{}', 0, 'v5', '2026-01-01T00:00:00.000Z', 'done')`,
		`INSERT INTO op_costs VALUES ('cpu/1', 'Relu', '4 -> 4', '', 0.5, 3, 1, '2026-01-01T00:00:00.000Z')`)
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	mustNil(t, db.Close())
}
