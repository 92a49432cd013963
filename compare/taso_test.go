package compare_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/axioms"
	"rulebook/build"
	"rulebook/compare"
	"rulebook/internal/testfiles"
	"rulebook/rules"
	"rulebook/store"
	"rulebook/verify"
)

// TestTASOAccountedFor builds the ≤3-operator rulebook (what 'rulebook
// build --max-ops 3' releases) and relates TASO's operator properties and
// TASO's two rule files to it.
func TestTASOAccountedFor(t *testing.T) {
	if testing.Short() {
		t.Skip("generates and proves the 3-operator rulebook")
	}
	// The package's long tests run side by side: each one's stages that
	// run on one goroutine leave the other cores to the rest.
	t.Parallel()
	ctx := context.Background()
	reg := rules.Default()
	set, err := axioms.Builtin(rules.All())
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sum, err := build.Run(ctx, db, build.Config{Registry: reg, Axioms: set, MaxOps: 3, Seed: 1, Tag: "v3", ToolVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the ≤3-operator release holds %d rules", sum.Version.Rules)
	cfg := verify.Config{Registry: reg, Axioms: set}
	t.Run("table 2.2", func(t *testing.T) {
		testTable22(t, relate(ctx, t, db, filepath.Join("testdata", "taso-table-2.2.sexpr"), cfg))
	})
	for _, name := range []string{"taso-generator-3ops.pb", "taso-repo-graph_subst.pb"} {
		t.Run(name, func(t *testing.T) { testAnchor(t, relate(ctx, t, db, testfiles.Shared(t, "anchors", name), cfg)) })
	}
}

// relate compares a rule file with version v3 and proves its rules.
func relate(ctx context.Context, t *testing.T, db *store.Store, path string, cfg verify.Config) *compare.Report {
	t.Helper()
	r, err := compare.File(ctx, db, path, "", "v3", compare.DefaultLimits, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// testTable22: every property of TASO's Table 2.2 is contained in the
// release or implied by it.
func testTable22(t *testing.T, r *compare.Report) {
	properties := map[string]bool{}
	for _, v := range r.Verdicts {
		properties[propertyName(v.Name)] = true
		if v.Relation != compare.Contained && v.Relation != compare.Implied {
			t.Errorf("%s: %s, want contained or implied\n  %s", v.Name, v.Relation, v.Text)
		}
	}
	if len(properties) != 43 {
		t.Errorf("the file names %d properties, want Table 2.2's 43", len(properties))
	}
}

// propertyName is the name a sexpr file's "; name:" line gave a rule.
func propertyName(ruleName string) string {
	_, name, ok := strings.Cut(ruleName, " (")
	if !ok {
		return ""
	}
	return strings.TrimSuffix(name, ")")
}

// testAnchor: every rule of a TASO rule file that the release misses has
// a cause, and the release contains or implies at least 99% of the true
// rules our operand roles allow.
func testAnchor(t *testing.T, r *compare.Report) {
	tally := compare.Count(r.Verdicts)
	for i, v := range r.Verdicts {
		reached := v.Relation == compare.Contained || v.Relation == compare.Implied
		if reached && r.Proofs[i].Status == verify.Refuted {
			t.Errorf("%s is %s, yet our verifier refutes it (%s): %s", v.Name, v.Relation, r.Proofs[i].Reason, v.Text)
		}
		if v.Relation == compare.Missed {
			t.Logf("%s: %s\n  %s", v.Name, v.Why, v.Text)
			if v.Why.Cause == compare.Unexplained {
				t.Errorf("%s is missed without a cause: %s", v.Name, v.Text)
			}
		}
	}
	reached, gaps, outside := tally.Reached(), tally.Missed(compare.Gap), tally.Missed(compare.OutsideRoles)
	t.Logf("contained %d, implied %d, trivial %d; missed: false %d, outside our operand roles %d, gaps %d",
		tally.Relations[compare.Contained], tally.Relations[compare.Implied], tally.Relations[compare.Trivial],
		tally.Missed(compare.False), outside, gaps)
	if 100*reached < 99*(reached+gaps) {
		t.Errorf("the release contains or implies %d of the %d true rules within our operand roles, under 99%%", reached, reached+gaps)
	}
}
