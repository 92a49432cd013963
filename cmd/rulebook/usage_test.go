package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"rulebook/rules"
	"rulebook/store"
)

const (
	ruleComm  = "(ewadd ?a ?b) => (ewadd ?b ?a)"
	ruleRelu  = "(relu (relu ?a)) => (relu ?a)"
	ruleSplit = "(matmul ?a (concat 1 ?b ?c)) => (concat 1 (matmul ?a ?b) (matmul ?a ?c))" // longer than the heat map lets a rule be (store.ruleWidth)
)

// releasedDB makes a database with version v1 (one proved rule, without
// running the generator or Z3) and returns its path and v1's hash.
func releasedDB(t *testing.T) (string, string) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "r.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	run, err := db.BeginRun(ctx, "generate", "{}", 0, "test")
	must(t, err)
	_, err = db.InsertRules(ctx, []store.Rule{{Hash: "00000000000000a1", Text: rules.Text{Src: "(ewadd ?a ?b)", Dst: "(ewadd ?b ?a)", Inputs: "?a:4x4 ?b:4x4"}, SrcOps: 1, DstOps: 1, NumInputs: 2, NumOutputs: 1, Operators: []string{"ewadd"}, RunID: run}})
	must(t, err)
	set := store.AxiomSet{Hash: "00112233aabbccdd", Dir: "axioms", Axioms: 1, Text: "ewadd-comm\t\t(forall ...)\n"}
	must(t, db.SaveAxiomSet(ctx, set))
	rules, err := db.ListRules(ctx, store.Filter{})
	must(t, err)
	must(t, db.RecordProofs(ctx, []store.Proof{{RuleID: rules[0].ID, Text: rules[0].Text, RunID: run, AxiomSet: set.Hash, Status: "proved", Solver: "test"}}))
	v, _, err := db.Release(ctx, "v1", "test", trustCandidates(t, db))
	must(t, err)
	return path, v.Hash
}

// trustCandidates re-establishes every release candidate as it stands, for
// tests whose proofs are made up: they stand in for the prover, which
// 'rulebook release' runs (verify.Release).
func trustCandidates(t *testing.T, db *store.Store) store.Reestablished {
	t.Helper()
	cands, _, err := db.ReleaseCandidates(context.Background())
	must(t, err)
	re := store.Reestablished{}
	for _, c := range cands {
		re[c.Rule.ID] = c.Claim()
	}
	return re
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// seedOptimizations records resnet50 and squeezenet optimized with v1, and
// bert with a bundle this database does not hold.
func seedOptimizations(t *testing.T, db, v1 string) {
	t.Helper()
	opt := func(model, tag, hash string, uses ...store.RuleUse) store.Optimization {
		return store.Optimization{Model: model, VersionTag: tag, VersionHash: hash, CostModel: "analytic",
			Before: 10, After: 8, Explored: 10, Seen: 40, Seconds: 0.5, Stopped: "queue empty", Uses: uses}
	}
	for _, o := range []store.Optimization{
		opt("/models/resnet50.onnx", "v1", v1, store.RuleUse{Rule: ruleComm, Count: 9}, store.RuleUse{Rule: ruleRelu, Count: 1}, store.RuleUse{Rule: ruleSplit, Count: 2}),
		opt("squeezenet.onnx", "v1", v1, store.RuleUse{Rule: ruleComm, Count: 3}, store.RuleUse{Rule: ruleSplit, Count: 4}),
		opt("bert.onnx", "b1", strings.Repeat("b", 64), store.RuleUse{Rule: ruleComm, Count: 5}),
	} {
		must(t, recordOptimization(context.Background(), db, "optimize", `{"model":"`+o.Model+`"}`, o))
	}
}

// recordOptimization stores an optimization in a run of its own, as
// 'rulebook optimize' does, in the database at path.
func recordOptimization(ctx context.Context, path, command, config string, o store.Optimization) error {
	db, err := store.Open(ctx, path)
	if err != nil {
		return err
	}
	defer db.Close()
	if o.RunID, err = db.BeginRun(ctx, command, config, 0, toolVersion); err != nil {
		return err
	}
	_, err = db.RecordOptimization(ctx, o)
	return db.EndRun(ctx, store.Run{ID: o.RunID, Status: store.RunDone, Stored: 1}, err)
}

func TestUsageHeatMap(t *testing.T) {
	ctx := context.Background()
	db, v1 := releasedDB(t)
	seedOptimizations(t, db, v1)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"all versions", nil, `RULE                                                          bert  resnet50  squeezenet  TOTAL
(ewadd ?a ?b) => (ewadd ?b ?a)                                  5▓        9█          3▒     17
(matmul ?a (concat 1 ?b ?c)) => (concat 1 (matmul ?a ?b) (m…              2░          4▒      6
(relu (relu ?a)) => (relu ?a)                                             1░                  1
3 rules applied in 3 models; shades ░ ▒ ▓ █ by quarters of the largest count, 9
`},
		{"by tag", []string{"--version", "v1"}, `RULE                                                          resnet50  squeezenet  TOTAL
(ewadd ?a ?b) => (ewadd ?b ?a)                                      9█          3▒     12
(matmul ?a (concat 1 ?b ?c)) => (concat 1 (matmul ?a ?b) (m…        2░          4▒      6
(relu (relu ?a)) => (relu ?a)                                       1░                  1
3 rules applied in 2 models; shades ░ ▒ ▓ █ by quarters of the largest count, 9
`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := run(ctx, append([]string{"usage", "--db", db}, c.args...)...)
			if err != nil || out != c.want {
				t.Errorf("usage %v (err %v):\n%s\nwant:\n%s", c.args, err, out, c.want)
			}
		})
	}
	byHash, err := run(ctx, "usage", "--version", v1[:8], "--db", db)
	if byTag, _ := run(ctx, "usage", "--version", "v1", "--db", db); err != nil || byHash != byTag {
		t.Errorf("usage --version %s (err %v) differs from --version v1:\n%s", v1[:8], err, byHash)
	}
}

func TestUsageCSVAndJSON(t *testing.T) {
	ctx := context.Background()
	db, v1 := releasedDB(t)
	seedOptimizations(t, db, v1)
	csv, err := run(ctx, "usage", "--format", "csv", "--version", "v1", "--db", db)
	wantCSV := "rule,model,count\n" +
		ruleComm + ",resnet50.onnx,9\n" + ruleComm + ",squeezenet.onnx,3\n" +
		ruleSplit + ",resnet50.onnx,2\n" + ruleSplit + ",squeezenet.onnx,4\n" +
		ruleRelu + ",resnet50.onnx,1\n"
	if err != nil || csv != wantCSV {
		t.Errorf("csv (err %v):\n%s\nwant:\n%s", err, csv, wantCSV)
	}
	out, err := run(ctx, "usage", "--format", "json", "--db", db)
	must(t, err)
	var got []store.Usage
	must(t, json.Unmarshal([]byte(out), &got))
	use := func(rule, model string, count int) store.Usage {
		return store.Usage{Rule: rule, Model: model, Count: count}
	}
	want := []store.Usage{
		use(ruleComm, "bert.onnx", 5), use(ruleComm, "resnet50.onnx", 9), use(ruleComm, "squeezenet.onnx", 3),
		use(ruleSplit, "resnet50.onnx", 2), use(ruleSplit, "squeezenet.onnx", 4), use(ruleRelu, "resnet50.onnx", 1),
	}
	if !reflect.DeepEqual(got, want) || !strings.Contains(out, `"rule": "(ewadd ?a ?b) => (ewadd ?b ?a)"`) {
		t.Errorf("json:\n%s", out)
	}
}

func TestUsageEmptyAndErrors(t *testing.T) {
	ctx := context.Background()
	// A database with nothing in it; one that does not exist is refused
	// (issue 13: reading commands create nothing).
	empty, missing := filepath.Join(t.TempDir(), "empty.db"), filepath.Join(t.TempDir(), "missing.db")
	s, err := store.Open(ctx, empty)
	must(t, err)
	must(t, s.Close())
	released, _ := releasedDB(t)
	cases := []struct {
		name    string
		args    []string
		want    string // output, or the error's text when wantErr
		wantErr bool
	}{
		{"empty text", []string{"--db", empty}, "no optimizations recorded in " + empty + "; run 'rulebook optimize ... --db " + empty + "' first\n", false},
		{"empty csv", []string{"--db", empty, "--format", "csv"}, "rule,model,count\n", false},
		{"empty json", []string{"--db", empty, "--format", "json"}, "[]\n", false},
		{"none with version", []string{"--db", released, "--version", "v1"}, "no optimizations with version v1 recorded in " + released, false},
		{"unknown version", []string{"--db", released, "--version", "v9"}, `--version: unknown version "v9" (released: v1)`, true},
		{"nothing released", []string{"--db", empty, "--version", "v1"}, `unknown version "v1": nothing has been released yet`, true},
		{"bad format", []string{"--db", empty, "--format", "xml"}, `--format must be text, csv or json, got "xml"`, true},
		{"missing database", []string{"--db", missing}, "no rulebook database at " + missing + " (no such file)", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := run(ctx, append([]string{"usage"}, c.args...)...)
			if _, statErr := os.Stat(missing); statErr == nil {
				t.Errorf("%s was created", missing)
			}
			switch {
			case c.wantErr && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("err = %v, want %q", err, c.want)
			case !c.wantErr && (err != nil || !strings.HasPrefix(out, c.want)):
				t.Errorf("output (err %v):\n%s\nwant:\n%s", err, out, c.want)
			}
		})
	}
}

// The recorded time defaults to now; usage keeps each model's latest.
func TestUsageLatestOptimization(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "r.db")
	o := store.Optimization{Model: "a/m.onnx", VersionTag: "b", VersionHash: strings.Repeat("b", 64), CostModel: "analytic",
		At: time.Now().Add(-time.Hour), Uses: []store.RuleUse{{Rule: ruleRelu, Count: 7}}}
	must(t, recordOptimization(ctx, db, "optimize", "{}", o))
	o.Model, o.At, o.Uses = "b/m.onnx", time.Time{}, []store.RuleUse{{Rule: ruleComm, Count: 2}}
	must(t, recordOptimization(ctx, db, "optimize", "{}", o))
	out, err := run(ctx, "usage", "--format", "csv", "--db", db)
	if want := "rule,model,count\n" + ruleComm + ",m.onnx,2\n"; err != nil || out != want {
		t.Errorf("csv (err %v):\n%s\nwant:\n%s", err, out, want)
	}
}
