package compare_test

import (
	"context"
	"path/filepath"
	"testing"

	"rulebook/axioms"
	"rulebook/build"
	"rulebook/compare"
	"rulebook/internal/testfiles"
	"rulebook/rules"
	"rulebook/store"
	"rulebook/verify"
)

// TestFlexFlowAgainstParallelRelease builds the parallel release ('rulebook
// build --ops parallel --max-ops 3 --degrees 2,3') and relates FlexFlow's
// file to it: of the rules true at degrees 2, 3 and 4 that apply somewhere,
// at least 95% are contained or implied, and no rule the release contains
// or implies is refuted by our verifier.
func TestFlexFlowAgainstParallelRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("generates and proves the parallel release")
	}
	ctx := context.Background()
	reg := rules.All()
	set, err := axioms.Builtin(reg)
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "pcg.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sum, err := build.Run(ctx, db, build.Config{Registry: reg, Ops: rules.Parallel(), Degrees: []int{2, 3}, Axioms: set, MaxOps: 3, Seed: 1, Tag: "v1", ToolVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := compare.File(ctx, db, testfiles.Shared(t, "anchors", "flexflow-graph_subst_3_v2.json"), "", "v1", compare.DefaultLimits, verify.Config{Registry: reg, Axioms: set}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reached, holds, never := compare.EveryDegree(r.Verdicts)
	t.Logf("the parallel release holds %d rules; it contains or implies %d of FlexFlow's %d rules true at every degree (%d never apply)", sum.Version.Rules, reached, holds, never)
	if len(r.Verdicts) != 640 || 100*reached < 95*holds {
		t.Errorf("%d verdicts; %d of %d true rules contained or implied, under 95%%", len(r.Verdicts), reached, holds)
	}
	for i, v := range r.Verdicts {
		if (v.Relation == compare.Contained || v.Relation == compare.Implied) && r.Proofs[i].Status == verify.Refuted {
			t.Errorf("%s is %s, yet our verifier refutes it: %s", v.Name, v.Relation, v.Text)
		}
	}
}
