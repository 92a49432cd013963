package verify

import (
	"strings"
	"testing"
	"time"

	"rulebook/rules"
)

// TestConditionedRuleProvedOnlyWithItsCondition: pooling after a 1×1
// convolution instead of before it is proved with its condition, from the
// axiom that carries the same condition; the same rule without the
// condition is refuted by a 3×3 kernel at other shapes; with a 3×3
// condition, or with max pooling, it is not proved.
func TestConditionedRuleProvedOnlyWithItsCondition(t *testing.T) {
	const avg = "(conv2d 1 same none 1 (pool_avg 3 1 same ?a) ?b) => (pool_avg 3 1 same (conv2d 1 same none 1 ?a ?b))"
	const max = "(conv2d 1 same none 1 (pool_max 3 1 same ?a) ?b) => (pool_max 3 1 same (conv2d 1 same none 1 ?a ?b))"
	cases := []struct {
		name, text, inputs string
		want               rules.Status
		core               string // an axiom the proof uses, or part of the reason
	}{
		{"with its condition", avg + " if (kernel ?b 1 1)", "?a:1x4x5x5 ?b:3x4x1x1", Proved, "pool-avg-conv1x1"},
		{"without it", avg, "?a:1x4x5x5 ?b:3x4x1x1", Refuted, "at "},
		{"with a 3x3 condition", avg + " if (kernel ?b 3 3)", "?a:1x4x5x5 ?b:3x4x3x3", Refuted, "at "},
		{"max pooling", max + " if (kernel ?b 1 1)", "?a:1x4x5x5 ?b:3x4x1x1", Refuted, "at "},
	}
	set := loadAxioms(t)
	cfg := Config{Registry: rules.Default(), Axioms: set, Budget: Budget{WallClock: 20 * time.Second}}
	var jobs []Job
	for i, c := range cases {
		jobs = append(jobs, Job{ID: int64(i), Rule: parse(t, c.text, c.inputs)})
	}
	res := runJobs(t, cfg, jobs)
	for i, c := range cases {
		r := res[int64(i)]
		detail := r.Reason + " " + strings.Join(r.Core, " ")
		t.Logf("%s: %s %s", c.name, r.Status, detail)
		if r.Status != c.want || !strings.Contains(detail, c.core) {
			t.Errorf("%s: %s (%s), want %s with %q", c.name, r.Status, detail, c.want, c.core)
		}
	}
}

// TestQueryAssertsConditions: the standalone obligation of a conditioned
// rule declares the condition's predicate and asserts it of the input.
func TestQueryAssertsConditions(t *testing.T) {
	r := parse(t, "(conv2d 1 same none 1 (pool_avg 3 1 same ?a) ?b) => (pool_avg 3 1 same (conv2d 1 same none 1 ?a ?b)) if (kernel ?b 1 1)", "")
	q := Query(rules.Default(), loadAxioms(t), r)
	for _, want := range []string{"(declare-fun kernel (Tensor Int Int) Bool)", "(assert (kernel input1 1 1))"} {
		if !strings.Contains(q, want) {
			t.Errorf("query lacks %s", want)
		}
	}
}
