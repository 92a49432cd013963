package rewrite

import (
	"context"
	"encoding/binary"

	"rulebook/rules"
)

// Rewrite is a rule used in one direction: From is replaced by To. Make
// one with NewRewrite or Both.
type Rewrite struct {
	From, To *rules.Graph
	// Rule is the caller's index of the rule; Reversed says that From is
	// the rule's target.
	Rule     int
	Reversed bool
	// Commutative lets From match the operands of commutative operators
	// in either order (FindCommutative).
	Commutative bool
	ops         []string // the operators From uses
}

// NewRewrite prepares a directed use of rule r, the caller's rule number
// index.
func NewRewrite(r *rules.Rule, index int, reversed bool) Rewrite {
	from, to := &r.Src, &r.Dst
	if reversed {
		from, to = to, from
	}
	return Rewrite{From: from, To: to, Rule: index, Reversed: reversed, ops: from.OpNames()}
}

// Both returns the rewrites of a rule in both directions; a side without
// nodes matches nowhere, so it is left out as a pattern.
func Both(r *rules.Rule, index int) []Rewrite {
	out := []Rewrite{NewRewrite(r, index, false)}
	if len(r.Dst.Nodes) > 0 {
		out = append(out, NewRewrite(r, index, true))
	}
	return out
}

// fits reports whether a graph using these operators can contain the
// rewrite's pattern at all. Matches need not be injective, so only the
// presence of each operator counts, not how often it occurs.
func (rw *Rewrite) fits(host map[string][]int) bool {
	for _, op := range rw.ops {
		if len(host[op]) == 0 {
			return false
		}
	}
	return true
}

// Neighbours calls yield with every graph one rewrite away from g, until
// yield returns false. Replacements that would be cyclic are skipped.
func Neighbours(g *rules.Graph, rws []Rewrite, yield func(rw *Rewrite, m *Match, next *rules.Graph) bool) {
	Matches(g, rws, func(rw *Rewrite, m *Match) bool {
		next, err := Apply(g, rw.From, rw.To, m)
		return err != nil || yield(rw, m, next)
	})
}

// Matches calls yield with every match of every rewrite's pattern in g, in
// the order Neighbours visits them, until yield returns false. It builds
// no graph: a caller that can tell what a rewrite would give without
// copying g (the optimizer's search) applies only the ones it keeps.
//
// Rule sets hold many rules with one pattern (up to the numbering of its
// inputs) and different replacements: such a pattern is searched for once
// and its matches replayed, renumbered, for the other rewrites. Matching
// does not depend on the numbering, so the matches and their order are
// those a search would find.
func Matches(g *rules.Graph, rws []Rewrite, yield func(rw *Rewrite, m *Match) bool) {
	NewMatcher(rws).Matches(g, yield)
}

// Matcher matches a list of rewrites in graph after graph, as Matches
// does, having worked out once which rewrites share a pattern; it keeps
// its record of matches from one graph to the next, so one goroutine uses
// it at a time.
type Matcher struct {
	rws   []Rewrite
	forms []patternForm
	// lists records the matches of each pattern form that more than one
	// rewrite has; filled says which have been searched for in this graph.
	lists  map[string]*matchList
	filled map[*matchList]bool
	// cuts of each rewrite, for MatchesAcyclic (see formCuts).
	cuts [][]cut
}

// NewMatcher prepares to match rws.
func NewMatcher(rws []Rewrite) *Matcher {
	mt := &Matcher{rws: rws, forms: make([]patternForm, len(rws)), lists: map[string]*matchList{}, filled: map[*matchList]bool{}}
	count := map[string]int{}
	for i := range rws {
		mt.forms[i] = formOf(&rws[i])
		count[mt.forms[i].key]++
	}
	for i, f := range mt.forms {
		if count[f.key] > 1 && mt.lists[f.key] == nil {
			mt.lists[f.key] = &matchList{nodes: len(rws[i].From.Nodes), inputs: len(f.inputs)}
		}
	}
	mt.cuts = formCuts(rws, mt.forms)
	return mt
}

// Matches calls yield with every match in g of every rewrite's pattern
// (see the function Matches), until yield returns false.
func (mt *Matcher) Matches(g *rules.Graph, yield func(rw *Rewrite, m *Match) bool) {
	mt.MatchesAcyclic(g, nil, yield)
}

// MatchesAcyclic is Matches without the matches that anc shows Apply
// would refuse for a cycle (see Ancestry); the others come in the same
// order. A nil anc skips none.
func (mt *Matcher) MatchesAcyclic(g *rules.Graph, anc Ancestry, yield func(rw *Rewrite, m *Match) bool) {
	idx := indexHost(g)
	clear(mt.filled)
	for i := range mt.rws {
		rw, form := &mt.rws[i], &mt.forms[i]
		if !rw.fits(idx.byOp) {
			continue
		}
		list := mt.lists[form.key]
		if mt.filled[list] {
			if !list.replay(rw, form, yield) {
				return
			}
			continue
		}
		if list != nil {
			list.matched, list.bound = list.matched[:0], list.bound[:0]
			mt.filled[list] = true
		}
		stop := false
		find(rw.From, g, idx, rw.Commutative, skipCycles{anc, mt.cuts[i]}, func(m *Match) bool {
			list.add(m, form)
			stop = !yield(rw, m)
			return !stop
		})
		if stop {
			return
		}
	}
}

// patternForm is a pattern with its inputs numbered in the order its
// nodes first read them: key encodes it (and whether it matches
// commutatively), inputs[k] is the pattern's number of the k-th input.
type patternForm struct {
	key    string
	inputs []int
}

func formOf(rw *Rewrite) patternForm {
	var f patternForm
	canon := map[int]int{}
	var b []byte
	value := func(v rules.Value) {
		if !v.IsInput() {
			b = binary.LittleEndian.AppendUint64(append(b, 'n'), uint64(v.Node))
			b = binary.LittleEndian.AppendUint64(b, uint64(v.Out))
			return
		}
		k, ok := canon[v.Input()]
		if !ok {
			k = len(f.inputs)
			canon[v.Input()] = k
			f.inputs = append(f.inputs, v.Input())
		}
		b = binary.LittleEndian.AppendUint64(append(b, 'i'), uint64(k))
	}
	if rw.Commutative {
		b = append(b, 'c')
	}
	for i := range rw.From.Nodes {
		n := &rw.From.Nodes[i]
		b = kindKey(append(b, '('), n)
		for _, a := range n.Args {
			value(a)
		}
	}
	b = append(b, ')')
	for _, o := range rw.From.Outputs {
		value(o)
	}
	f.key = string(b)
	return f
}

// matchList records a pattern's matches, its inputs in the pattern
// form's numbering, to replay them for another pattern of the same form.
type matchList struct {
	nodes, inputs int
	matched       []int
	bound         []rules.Value
}

// add records m; a nil list records nothing.
func (l *matchList) add(m *Match, form *patternForm) {
	if l == nil {
		return
	}
	l.matched = append(l.matched, m.Nodes...)
	for _, in := range form.inputs {
		l.bound = append(l.bound, m.Inputs[in])
	}
}

// replay yields the recorded matches as matches of rw's pattern, whose
// form is form, until yield returns false.
func (l *matchList) replay(rw *Rewrite, form *patternForm, yield func(rw *Rewrite, m *Match) bool) bool {
	m := &Match{Inputs: make([]rules.Value, rw.From.NumInputs), Bound: make([]bool, rw.From.NumInputs)}
	for _, in := range form.inputs {
		m.Bound[in] = true
	}
	for k := 0; k*l.nodes < len(l.matched); k++ {
		m.Nodes = l.matched[k*l.nodes : (k+1)*l.nodes]
		for j, in := range form.inputs {
			m.Inputs[in] = l.bound[k*l.inputs+j]
		}
		if !yield(rw, m) {
			return false
		}
	}
	return true
}

// Step is one rewrite of a derivation.
type Step struct {
	Rule     int
	Reversed bool
	Result   *rules.Graph
}

// Limits bound a search.
type Limits struct {
	Steps    int // rewrites in the sequence
	Nodes    int // nodes of any graph on the way
	Explored int // graphs visited, both directions together
	// Admit, if set, says whether a graph may be on the way (one whose
	// shapes fit, say); the search neither keeps nor extends the others.
	Admit func(*rules.Graph) bool
}

type visit struct {
	g      *rules.Graph
	parent string
	step   Step // how g was reached from parent
	depth  int
}

// Derive looks for a sequence of at most lim.Steps rewrites that turns from
// into to, searching breadth-first from both ends (rules are equalities, so
// rws should hold both directions of each rule). It returns the sequence,
// or nil when none exists within the limits, and stops early when ctx ends.
func Derive(ctx context.Context, from, to *rules.Graph, rws []Rewrite, lim Limits) ([]Step, error) {
	fromKey, toKey := Key(from), Key(to)
	if fromKey == toKey {
		return []Step{}, nil
	}
	sides := [2]map[string]visit{{fromKey: {g: from}}, {toKey: {g: to}}}
	frontiers := [2][]string{{fromKey}, {toKey}}
	explored := 2
	for depth := 0; depth < lim.Steps; depth++ {
		s := depth % 2 // alternate: forward from `from`, then from `to`
		var next []string
		for _, key := range frontiers[s] {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			cur := sides[s][key]
			var meet string
			Neighbours(cur.g, rws, func(rw *Rewrite, _ *Match, g *rules.Graph) bool {
				if lim.Nodes > 0 && len(g.Nodes) > lim.Nodes || lim.Admit != nil && !lim.Admit(g) {
					return true
				}
				k := Key(g)
				if _, seen := sides[s][k]; seen {
					return true
				}
				sides[s][k] = visit{g: g, parent: key, step: Step{Rule: rw.Rule, Reversed: rw.Reversed, Result: g}, depth: cur.depth + 1}
				next = append(next, k)
				explored++
				if _, ok := sides[1-s][k]; ok {
					meet = k
					return false
				}
				return lim.Explored <= 0 || explored < lim.Explored
			})
			if meet != "" {
				return joinPaths(sides, meet), nil
			}
			if lim.Explored > 0 && explored >= lim.Explored {
				return nil, nil
			}
		}
		frontiers[s] = next
	}
	return nil, nil
}

// joinPaths turns the two half-searches that met at key into one sequence
// from the first side's start to the second side's.
func joinPaths(sides [2]map[string]visit, meet string) []Step {
	var forward []Step
	for k := meet; sides[0][k].depth > 0; k = sides[0][k].parent {
		forward = append(forward, sides[0][k].step)
	}
	for i, j := 0, len(forward)-1; i < j; i, j = i+1, j-1 {
		forward[i], forward[j] = forward[j], forward[i]
	}
	// Steps found from the far end are walked back: each is applied in
	// the opposite direction, and its result is its parent graph.
	for k := meet; sides[1][k].depth > 0; k = sides[1][k].parent {
		v := sides[1][k]
		forward = append(forward, Step{Rule: v.step.Rule, Reversed: !v.step.Reversed, Result: sides[1][v.parent].g})
	}
	return forward
}
