package prune

import (
	"context"
	"testing"

	"rulebook/rules"
)

const distribute = "(ewmul (ewadd ?a ?b) ?c) => (ewadd (ewmul ?a ?c) (ewmul ?b ?c))"

func TestPrune(t *testing.T) {
	type rule struct {
		text   string
		proved bool
	}
	type want struct {
		by     int64
		reason Reason
	}
	cases := []struct {
		name  string
		rules []rule         // IDs are 1-based positions
		want  map[int64]want // pruned rules; all others kept
	}{
		{"merged inputs are a renaming", []rule{
			{distribute, true},
			{"(ewmul (ewadd ?a ?b) ?a) => (ewadd (ewmul ?a ?a) (ewmul ?b ?a))", true},
		}, map[int64]want{2: {1, Renaming}}},
		{"a shared subgraph at the inputs", []rule{
			{"(transpose (transpose ?a)) => ?a", true},
			{"(transpose (transpose (relu ?a))) => (relu ?a)", true},
		}, map[int64]want{2: {1, CommonInput}}},
		{"a shared subgraph at the outputs", []rule{
			{distribute, true},
			{"(relu (ewmul (ewadd ?a ?b) ?c)) => (relu (ewadd (ewmul ?a ?c) (ewmul ?b ?c)))", true},
		}, map[int64]want{2: {1, CommonOutput}}},
		{"only proved rules prune", []rule{
			{distribute, false},
			{"(ewmul (ewadd ?a ?b) ?a) => (ewadd (ewmul ?a ?a) (ewmul ?b ?a))", true},
		}, map[int64]want{}},
		{"unproved rules are pruned too", []rule{
			{distribute, true},
			{"(ewmul (ewadd ?a ?b) ?a) => (ewadd (ewmul ?a ?a) (ewmul ?b ?a))", false},
		}, map[int64]want{2: {1, Renaming}}},
		{"the most general rule wins whatever the order", []rule{
			{"(ewmul (ewadd ?a ?b) ?a) => (ewadd (ewmul ?a ?a) (ewmul ?b ?a))", true},
			{distribute, true},
		}, map[int64]want{1: {2, Renaming}}},
		{"a rule used in reverse", []rule{
			{"(ewadd ?a ?b) => (ewadd ?b ?a)", true},
			{"(ewadd (relu ?a) ?b) => (ewadd ?b (relu ?a))", true},
		}, map[int64]want{2: {1, CommonInput}}},
		{"commuted operands are not a renaming", []rule{
			{distribute, true},
			{"(ewmul ?c (ewadd ?a ?b)) => (ewadd (ewmul ?a ?c) (ewmul ?b ?c))", true},
		}, map[int64]want{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var in []Rule
			for i, r := range c.rules {
				parsed, err := rules.ParseRule(rules.Default(), r.text)
				if err != nil {
					t.Fatal(err)
				}
				in = append(in, Rule{ID: int64(i + 1), Rule: parsed, Proved: r.proved})
			}
			res, err := Prune(context.Background(), in, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := map[int64]want{}
			for _, d := range res.Decisions {
				got[d.ID] = want{d.By, d.Reason}
			}
			if len(got) != len(c.want) {
				t.Errorf("pruned %v, want %v", got, c.want)
			}
			for id, w := range c.want {
				if got[id] != w {
					t.Errorf("rule %d: got %+v, want %+v", id, got[id], w)
				}
			}
			last := res.Stages[len(res.Stages)-1]
			if last.Rules != len(c.rules)-len(c.want) {
				t.Errorf("final stage has %d rules, want %d", last.Rules, len(c.rules)-len(c.want))
			}
		})
	}
}

func TestPruneStops(t *testing.T) {
	r, _ := rules.ParseRule(rules.Default(), distribute)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Prune(ctx, []Rule{{ID: 1, Rule: r, Proved: true}}, nil); err != context.Canceled {
		t.Errorf("got %v, want context.Canceled", err)
	}
}
