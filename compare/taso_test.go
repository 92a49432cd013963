package compare_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rulebook/axioms"
	"rulebook/compare"
	"rulebook/enumerate"
	"rulebook/exchange"
	"rulebook/internal/testfiles"
	"rulebook/prune"
	"rulebook/rules"
	"rulebook/verify"
)

// TestTASOAccountedFor builds the ≤3-operator rulebook as 'generate
// --max-ops 3', 'verify', 'prune' and 'release' do, then relates TASO's
// operator properties and TASO's two rule files to it.
func TestTASOAccountedFor(t *testing.T) {
	if testing.Short() {
		t.Skip("generates and proves the 3-operator rulebook")
	}
	ctx := context.Background()
	reg := rules.Default()
	set, err := axioms.Load(filepath.Join("..", "axioms"), reg)
	if err != nil {
		t.Fatal(err)
	}
	ours := releaseThree(ctx, t, reg, set)
	t.Logf("the ≤3-operator release holds %d rules", len(ours))
	t.Run("table 2.2", func(t *testing.T) { testTable22(ctx, t, reg, ours) })
	for _, name := range []string{"taso-generator-3ops.pb", "taso-repo-graph_subst.pb"} {
		t.Run(name, func(t *testing.T) { testAnchor(ctx, t, reg, set, ours, name) })
	}
}

// releaseThree returns the rules a release of the ≤3-operator rulebook
// holds: the proved candidates that pruning keeps.
func releaseThree(ctx context.Context, t *testing.T, reg *rules.Registry, set *axioms.Set) []*rules.Rule {
	gen, err := enumerate.Generate(ctx, enumerate.Config{Registry: reg, Pool: rules.DefaultPool(), MaxOps: 3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	jobs := make([]verify.Job, len(gen.Candidates))
	for i, c := range gen.Candidates {
		jobs[i] = verify.Job{ID: int64(i), Rule: c.Rule}
	}
	proved := make([]bool, len(jobs))
	err = verify.Run(ctx, verify.Config{Registry: reg, Axioms: set, Timeout: 2 * time.Second}, jobs,
		func(j verify.Job, r verify.Result) error { proved[j.ID] = r.Status == verify.Proved; return nil })
	if err != nil {
		t.Fatal(err)
	}
	offered := make([]prune.Rule, len(jobs))
	for i, j := range jobs {
		offered[i] = prune.Rule{ID: j.ID, Rule: j.Rule, Proved: proved[i]}
	}
	res, err := prune.Prune(ctx, offered, nil)
	if err != nil {
		t.Fatal(err)
	}
	pruned := map[int64]bool{}
	for _, d := range res.Decisions {
		pruned[d.ID] = true
	}
	var out []*rules.Rule
	for i, j := range jobs {
		if proved[i] && !pruned[j.ID] {
			out = append(out, j.Rule)
		}
	}
	return out
}

// testTable22: every property of TASO's Table 2.2 is contained in the
// release or implied by it.
func testTable22(ctx context.Context, t *testing.T, reg *rules.Registry, ours []*rules.Rule) {
	theirs := readRuleFile(t, reg, filepath.Join("testdata", "taso-table-2.2.sexpr"))
	vs, err := compare.Compare(ctx, ours, theirs, compare.DefaultLimits, nil)
	if err != nil {
		t.Fatal(err)
	}
	properties := map[string]bool{}
	for _, v := range vs {
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
func testAnchor(ctx context.Context, t *testing.T, reg *rules.Registry, set *axioms.Set, ours []*rules.Rule, name string) {
	theirs := readRuleFile(t, reg, testfiles.Shared(t, "anchors", name))
	vs, err := compare.Compare(ctx, ours, theirs, compare.DefaultLimits, nil)
	if err != nil {
		t.Fatal(err)
	}
	compare.Explain(vs, refutedMissed(ctx, t, reg, set, vs), ours)
	tally := compare.Count(vs)
	for _, v := range vs {
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

// refutedMissed runs the verifier on the missed rules only, briefly: what
// matters is whether a counterexample refutes them.
func refutedMissed(ctx context.Context, t *testing.T, reg *rules.Registry, set *axioms.Set, vs []compare.Verdict) []bool {
	var jobs []verify.Job
	for i, v := range vs {
		if v.Relation == compare.Missed {
			jobs = append(jobs, verify.Job{ID: int64(i), Rule: v.Rule})
		}
	}
	refuted := make([]bool, len(vs))
	err := verify.Run(ctx, verify.Config{Registry: reg, Axioms: set, Timeout: 250 * time.Millisecond}, jobs,
		func(j verify.Job, r verify.Result) error { refuted[j.ID] = r.Status == verify.Refuted; return nil })
	if err != nil {
		t.Fatal(err)
	}
	return refuted
}

func readRuleFile(t *testing.T, reg *rules.Registry, path string) []compare.Foreign {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := exchange.Read(path, data, reg, exchange.GuessFormat(path, data))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]compare.Foreign, len(f.Rules))
	for i, n := range f.Rules {
		out[i] = compare.Foreign{Name: n.Name, Rule: n.Rule}
	}
	return out
}
