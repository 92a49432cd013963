package rewrite

import (
	"context"
	"testing"

	"rulebook/rules"
)

func parseRule(t *testing.T, text string) *rules.Rule {
	t.Helper()
	r, err := rules.ParseRule(rules.Default(), text)
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return r
}

func TestApply(t *testing.T) {
	cases := []struct {
		name, rule, host string // host is "HOST => WANT", sharing inputs
		want             []string
	}{
		{"at the root", "(relu (relu ?a)) => (relu ?a)",
			"(relu (relu ?a)) => ?a", []string{"(relu ?0)"}},
		{"inside a context", "(relu (relu ?a)) => (relu ?a)",
			"(ewadd (relu (relu ?a)) ?b) => ?a", []string{"(ewadd (relu ?0) ?1)"}},
		{"an input stands for a subgraph", "(transpose (transpose ?a)) => ?a",
			"(transpose (transpose (matmul ?a ?b))) => ?a", []string{"(matmul ?0 ?1)"}},
		{"two inputs merged", "(ewadd ?a ?b) => (ewadd ?b ?a)",
			"(ewadd ?a ?a) => ?a", []string{"(ewadd ?0 ?0)"}},
		{"every place", "(ewadd ?a ?b) => (ewadd ?b ?a)",
			"(ewmul (ewadd ?a ?b) (ewadd ?b ?c)) => ?a",
			[]string{"(ewmul (ewadd ?1 ?0) (ewadd ?1 ?2))", "(ewmul (ewadd ?0 ?1) (ewadd ?2 ?1))"}},
		{"an inner value used outside stays", "(relu (relu ?a)) => (relu ?a)",
			"(let ((%0 (relu ?a))) (ewadd (relu %0) %0)) => ?a", []string{"(ewadd (relu ?0) (relu ?0))"}},
		{"two pattern nodes on one host node", "(ewmul (relu ?a) (relu ?b)) => (relu (ewmul ?a ?b))",
			"(let ((%0 (relu ?a))) (ewmul %0 %0)) => ?a", []string{"(relu (ewmul ?0 ?0))"}},
		{"multiple outputs", "(outputs (relu ?a) (relu ?b)) => (let ((%0 (relu (concat 0 ?a ?b)))) (outputs (split0 0 %0) (split1 0 %0)))",
			"(ewadd (relu ?a) (relu ?b)) => ?a", []string{
				"(ewadd (split 0 (relu (concat 0 ?0 ?0)))#1 (relu ?1))", // both pattern nodes on relu ?a
				"(ewadd (split 0 (relu (concat 0 ?0 ?1)))#0 (split 0 (relu (concat 0 ?0 ?1)))#1)",
				"(ewadd (split 0 (relu (concat 0 ?1 ?0)))#1 (split 0 (relu (concat 0 ?1 ?0)))#0)",
				"(ewadd (relu ?0) (split 0 (relu (concat 0 ?1 ?1)))#1)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := parseRule(t, c.rule)
			host := &parseRule(t, c.host).Src
			var got []string
			Find(&r.Src, host, func(m *Match) bool {
				next, err := Apply(host, &r.Src, &r.Dst, m)
				if err != nil {
					t.Fatal(err)
				}
				if err := next.Validate(); err != nil {
					t.Fatalf("invalid result %s: %v", Term(next), err)
				}
				got = append(got, Term(next))
				return true
			})
			if len(got) != len(c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("result %d: got %s, want %s", i, got[i], c.want[i])
				}
			}
		})
	}
}

func TestKeyIgnoresNodeOrderAndSharing(t *testing.T) {
	for _, key := range []func(*rules.Graph) string{Key, Term} {
		a := parseRule(t, "(let ((%0 (relu ?a))) (ewadd %0 %0)) => (ewadd (relu ?a) (relu ?a))")
		if key(&a.Src) != key(&a.Dst) {
			t.Errorf("shared and unshared terms differ: %s vs %s", Term(&a.Src), Term(&a.Dst))
		}
		b := parseRule(t, "(ewadd ?a ?b) => (ewadd ?b ?a)")
		if key(&b.Src) == key(&b.Dst) {
			t.Errorf("operand order ignored: %s", Term(&b.Src))
		}
		c := parseRule(t, "(let ((%0 (concat 0 ?a ?b))) (outputs (split0 0 %0) (split1 0 %0))) => (let ((%0 (concat 0 ?a ?b))) (outputs (split1 0 %0) (split0 0 %0)))")
		if key(&c.Src) == key(&c.Dst) {
			t.Errorf("output order ignored: %s", Term(&c.Src))
		}
	}
}

func TestApplyRefusesCycles(t *testing.T) {
	// ?b is bound to ewmul(relu a, relu a), which reads the first output;
	// the replacement computes that output from ?b: a cycle.
	pattern := parseRule(t, "(let ((%0 (relu ?a))) (outputs %0 (ewadd ?b %0))) => (let ((%0 (ewadd ?b ?a))) (outputs %0 %0))")
	host := parseRule(t, "(let ((%0 (relu ?a))) (ewadd (ewmul %0 %0) %0)) => ?a")
	n := 0
	Find(&pattern.Src, &host.Src, func(m *Match) bool {
		n++
		if _, err := Apply(&host.Src, &pattern.Src, &pattern.Dst, m); err != ErrCycle {
			t.Errorf("got %v, want ErrCycle", err)
		}
		return true
	})
	if n != 1 {
		t.Errorf("%d matches, want 1", n)
	}
}

func TestDerive(t *testing.T) {
	var rws []Rewrite
	for i, text := range []string{
		"(ewadd ?a ?b) => (ewadd ?b ?a)",
		"(ewadd (ewadd ?a ?b) ?c) => (ewadd ?a (ewadd ?b ?c))",
	} {
		rws = append(rws, Both(parseRule(t, text), i)...)
	}
	goal := parseRule(t, "(ewadd (ewadd ?a ?b) ?c) => (ewadd (ewadd ?c ?b) ?a)")
	steps, err := Derive(context.Background(), &goal.Src, &goal.Dst, rws, Limits{Steps: 4, Nodes: 4})
	if err != nil || steps == nil {
		t.Fatalf("no derivation (err %v)", err)
	}
	if got, want := Key(steps[len(steps)-1].Result), Key(&goal.Dst); got != want {
		t.Errorf("derivation ends at %s, want %s", got, want)
	}
	// Replay the steps to check each is one rewrite of the previous graph.
	cur := &goal.Src
	for i, s := range steps {
		found := false
		for _, rw := range rws {
			if rw.Rule != s.Rule || rw.Reversed != s.Reversed {
				continue
			}
			Find(rw.From, cur, func(m *Match) bool {
				next, err := Apply(cur, rw.From, rw.To, m)
				if err == nil && Key(next) == Key(s.Result) {
					found = true
				}
				return !found
			})
		}
		if !found {
			t.Fatalf("step %d (rule %d reversed %v) does not lead from %s to %s", i, s.Rule, s.Reversed, Key(cur), Key(s.Result))
		}
		cur = s.Result
	}
	none, err := Derive(context.Background(), &goal.Src, &parseRule(t, "(ewadd ?a ?b) => (ewmul ?a ?b)").Dst, rws, Limits{Steps: 4})
	if err != nil || none != nil {
		t.Errorf("derived an unrelated graph: %v %v", none, err)
	}
}

// A pattern with two concat nodes applies to a graph with one, used twice.
func TestNeighboursOnSharedNodes(t *testing.T) {
	r := parseRule(t, "(conv2d 1 same none 1 (concat 1 ?a ?b) (concat 1 ?c ?d)) => (ewadd (conv2d 1 same none 1 ?a ?c) (conv2d 1 same none 1 ?b ?d))")
	host := parseRule(t, "(let ((%0 (concat 1 ?a ?b))) (conv2d 1 same none 1 %0 %0)) => ?a")
	var got []string
	Neighbours(&host.Src, Both(r, 0), func(_ *Rewrite, _ *Match, next *rules.Graph) bool {
		got = append(got, Term(next))
		return true
	})
	want := "(ewadd (conv2d 1 0 0 1 ?0 ?0) (conv2d 1 0 0 1 ?1 ?1))"
	if len(got) != 1 || got[0] != want {
		t.Errorf("got %q, want [%s]", got, want)
	}
}

// CommutativeKey equates graphs that differ by the operand order of
// commutative operators only, at any depth, and nothing more.
func TestCommutativeKey(t *testing.T) {
	cases := []struct {
		rule string
		same bool
	}{
		{"(ewadd ?a ?b) => (ewadd ?b ?a)", true},
		{"(relu (ewmul (ewadd ?a ?b) ?c)) => (relu (ewmul ?c (ewadd ?b ?a)))", true},
		{"(matmul ?a ?b) => (matmul ?b ?a)", false},
		{"(ewadd (ewadd ?a ?b) ?c) => (ewadd ?a (ewadd ?b ?c))", false},
	}
	for _, c := range cases {
		r := parseRule(t, c.rule)
		if same := CommutativeKey(&r.Src) == CommutativeKey(&r.Dst); same != c.same {
			t.Errorf("%s: same key %v, want %v", c.rule, same, c.same)
		}
	}
}

// FindCommutative matches a pattern whose commutative operators have their
// operands in the other order; Find does not.
func TestFindCommutative(t *testing.T) {
	host := parseRule(t, "(ewadd (relu ?a) (matmul ?a ?b)) => (relu ?a)")
	pattern := parseRule(t, "(ewadd (matmul ?a ?b) (relu ?a)) => (relu ?a)")
	count := func(find func(pattern, host *rules.Graph, yield func(*Match) bool)) int {
		n := 0
		find(&pattern.Src, &host.Src, func(m *Match) bool {
			if next, err := Apply(&host.Src, &pattern.Src, &pattern.Dst, m); err != nil || Term(next) != "(relu ?0)" {
				t.Errorf("apply: %v", err)
			}
			n++
			return true
		})
		return n
	}
	if n := count(Find); n != 0 {
		t.Errorf("Find: %d matches, want 0", n)
	}
	if n := count(FindCommutative); n != 1 {
		t.Errorf("FindCommutative: %d matches, want 1", n)
	}
}
