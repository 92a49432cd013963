package compare_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/axioms"
	"rulebook/build"
	"rulebook/compare"
	"rulebook/exchange"
	"rulebook/internal/english"
	"rulebook/rules"
	"rulebook/store"
	"rulebook/verify"
	"rulebook/version"
)

// TestVersionParallel releases a small parallel version ('rulebook build
// --ops parallel --degrees 2 --max-ops 2'), diffs it with itself, and
// compares its own rules, exported, against it (compare --version): every
// rule is contained and proved.
func TestVersionParallel(t *testing.T) {
	// The package's long tests run side by side: each one's stages that
	// run on one goroutine leave the other cores to the rest.
	t.Parallel()
	ctx := context.Background()
	reg := version.Registry()
	set, err := axioms.Builtin(reg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "pcg.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := build.Run(ctx, db, build.Config{Registry: reg, Ops: rules.Parallel(), Degrees: []int{2}, Axioms: set, MaxOps: 2, Seed: 1, Tag: "v1", ToolVersion: "test"}); err != nil {
		t.Fatal(err)
	}
	a, err := version.Open(ctx, path, "v1")
	if err != nil {
		t.Fatal(err)
	}
	var diff bytes.Buffer
	compare.DiffVersions(a, a).WriteText(&diff)
	if want := "v1 (" + a.Hash[:12] + ", " + english.Nouns(len(a.Texts), "rule") + ") -> v1 ("; !strings.HasPrefix(diff.String(), want) || !strings.HasSuffix(diff.String(), ": 0 added, 0 removed\n") {
		t.Errorf("diff v1 v1:\n%s", diff.String())
	}
	v, stored, err := db.VersionRules(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	var sexpr bytes.Buffer
	if _, err := exchange.Export(&sexpr, reg, "sexpr", v, stored, exchange.Selection{}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "v1.sexpr")
	if err := os.WriteFile(file, sexpr.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := compare.File(ctx, db, file, "sexpr", "v1", compare.DefaultLimits, verify.Config{Registry: reg, Axioms: set}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Verdicts) != len(a.Rules) {
		t.Fatalf("%d verdicts for %d rules", len(r.Verdicts), len(a.Rules))
	}
	for i, vd := range r.Verdicts {
		if vd.Relation != compare.Contained || r.Proofs[i].Status != verify.Proved {
			t.Errorf("%s: %s, %s; want contained and proved", vd.Text, vd.Relation, r.Proofs[i].Status)
		}
	}
}
