// Package prune removes rules that a more general proved rule already
// implies (TASO §2.5). A rule goes when it equals another up to renaming or
// merging of inputs. It goes too when its sides share a common subgraph, at
// the inputs or the outputs, that the other rule leaves out. Either way one
// rewrite by the kept rule turns its source into its target, and the
// decision records that. docs/design.md ("Data flow", step 4) tells more.
package prune

import (
	"cmp"
	"context"
	"slices"

	"rulebook/internal/progress"
	"rulebook/rewrite"
	"rulebook/rules"
)

// Reason says why a rule was pruned.
type Reason string

const (
	// Renaming: the rule is the other with inputs renamed or merged.
	Renaming Reason = "renaming"
	// CommonInput: both sides share a subgraph over the inputs that the
	// other rule takes as an input.
	CommonInput Reason = "common-subgraph-input"
	// CommonOutput: both sides sit inside the same surrounding graph,
	// which the other rule leaves out.
	CommonOutput Reason = "common-subgraph-output"
)

// Rule is a rule offered for pruning. Only proved rules can prune others.
type Rule struct {
	ID     int64
	Rule   *rules.Rule
	Proved bool
}

// Decision prunes rule ID in favour of rule By.
type Decision struct {
	ID, By   int64
	Reason   Reason
	Reversed bool // By was applied target to source
}

// Stage counts the rules left after a pruning stage.
type Stage struct {
	Name          string
	Rules, Proved int
}

// Result is the outcome of Prune.
type Result struct {
	Decisions []Decision
	Stages    []Stage
}

// Prune decides which rules are implied by more general proved ones. It
// works in two stages, as TASO's Table 2.3 reports them: renaming first,
// then common subgraphs among the rules renaming kept. Rules are visited
// from the most general (fewest operators, then most inputs), so a rule is
// only ever pruned in favour of one that is kept. report hears of each
// rule of each stage.
func Prune(ctx context.Context, rs []Rule, report progress.Func) (*Result, error) {
	order := slices.Clone(rs)
	slices.SortStableFunc(order, moreGeneralFirst)
	res := &Result{Stages: []Stage{count("initial", order)}}
	stages := []struct {
		name   string
		accept func(Reason) bool
	}{
		{"after renaming", func(r Reason) bool { return r == Renaming }},
		{"after common subgraph", func(Reason) bool { return true }},
	}
	for _, st := range stages {
		var err error
		var pruned []Decision
		order, pruned, err = stage(ctx, order, st.accept, func(done int) {
			report.Report(progress.Step{Stage: st.name, Done: int64(done), Total: int64(len(order))})
		})
		if err != nil {
			return nil, err
		}
		res.Decisions = append(res.Decisions, pruned...)
		res.Stages = append(res.Stages, count(st.name, order))
	}
	return res, nil
}

func moreGeneralFirst(a, b Rule) int {
	size := func(r *rules.Rule) int { return len(r.Src.Nodes) + len(r.Dst.Nodes) }
	return cmp.Or(
		cmp.Compare(size(a.Rule), size(b.Rule)),
		cmp.Compare(b.Rule.NumInputs, a.Rule.NumInputs),
		cmp.Compare(a.ID, b.ID))
}

func count(name string, rs []Rule) Stage {
	s := Stage{Name: name, Rules: len(rs)}
	for _, r := range rs {
		if r.Proved {
			s.Proved++
		}
	}
	return s
}

// stage keeps each rule, in order, unless a kept proved rule implies it for
// an accepted reason.
func stage(ctx context.Context, order []Rule, accept func(Reason) bool, done func(int)) (kept []Rule, pruned []Decision, err error) {
	var pruners []pruner
	for i, r := range order {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		if d, ok := prunedBy(r, pruners, accept); ok {
			pruned = append(pruned, d)
		} else {
			kept = append(kept, r)
			if r.Proved {
				pruners = append(pruners, pruner{id: r.ID, rewrites: rewrite.Both(r.Rule, len(pruners))})
			}
		}
		done(i + 1)
	}
	return kept, pruned, nil
}

type pruner struct {
	id       int64
	rewrites []rewrite.Rewrite
}

// prunedBy finds the first pruner that turns r's source into its target
// with one rewrite, for an accepted reason.
func prunedBy(r Rule, pruners []pruner, accept func(Reason) bool) (Decision, bool) {
	target := rewrite.Key(&r.Rule.Dst)
	for _, p := range pruners {
		var d Decision
		found := false
		rewrite.Neighbours(&r.Rule.Src, p.rewrites, func(rw *rewrite.Rewrite, m *rewrite.Match, next *rules.Graph) bool {
			if rewrite.Key(next) != target {
				return true
			}
			reason := classify(&r.Rule.Src, m)
			if !accept(reason) {
				return true
			}
			d, found = Decision{ID: r.ID, By: p.id, Reason: reason, Reversed: rw.Reversed}, true
			return false
		})
		if found {
			return d, true
		}
	}
	return Decision{}, false
}

// classify names the form of a one-step derivation from where its match
// lies in the source: the whole source with inputs for inputs is a
// renaming; unmatched nodes that only feed the match are a common subgraph
// at the inputs; any other unmatched node is a common subgraph at the
// outputs.
func classify(src *rules.Graph, m *rewrite.Match) Reason {
	matched := make([]bool, len(src.Nodes))
	for _, h := range m.Nodes {
		matched[h] = true
	}
	if !slices.Contains(matched, false) {
		return Renaming
	}
	feeds := make([]bool, len(src.Nodes))
	for i, v := range m.Inputs {
		if m.Bound[i] && !v.IsInput() {
			feeds[v.Node] = true
		}
	}
	// Ancestors of a feeding node feed the match too; nodes are in
	// topological order, so one backward sweep finds them all.
	for i := len(src.Nodes) - 1; i >= 0; i-- {
		if !feeds[i] || matched[i] {
			continue
		}
		for _, a := range src.Nodes[i].Args {
			if !a.IsInput() {
				feeds[a.Node] = true
			}
		}
	}
	for i := range src.Nodes {
		if !matched[i] && !feeds[i] {
			return CommonOutput
		}
	}
	return CommonInput
}
