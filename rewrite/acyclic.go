package rewrite

import "rulebook/rules"

// Ancestry is what a Matcher may know of its host beyond the nodes:
// which node is computed from which, and which ones the host's outputs
// need. With it, MatchesAcyclic skips matches whose rewrite Apply would
// refuse for a cycle before they are recorded, sorted and handed over.
// Pair patterns such as (outputs (relu ?a) (relu ?b)), the reverse of
// splitting a relu of a concat, match every pair of relus, and in a
// densenet, whose concatenations put nearly every relu above every later
// one, 98% of all matches made a cycle.
type Ancestry interface {
	// Above reports whether the host computes node b from node a,
	// directly or not.
	Above(a, b int) bool
	// Live reports whether the host's outputs are computed from node a.
	Live(a int) bool
}

// skipCycles is what find needs to skip cyclic matches; the zero value
// skips none.
type skipCycles struct {
	anc  Ancestry
	cuts []cut
}

// cut is a pattern output and a pattern input such that every output of
// the replacement is computed from the input, in every rewrite that
// shares the pattern's form (their matches are found once): where the
// host computes the input from the output, the replacement would be
// computed from itself.
type cut struct{ out, in int }

// formCuts lists, for each rewrite, its cuts in its own numbering of
// inputs; a pattern of one output has none, since the host would need a
// cycle already.
func formCuts(rws []Rewrite, forms []patternForm) [][]cut {
	every := map[string][]bool{} // per form, by the form's input number
	for i := range rws {
		if len(rws[i].From.Outputs) < 2 {
			continue
		}
		feeds := feedsEveryOutput(rws[i].To)
		f := &forms[i]
		all, seen := every[f.key]
		if !seen {
			all = make([]bool, len(f.inputs))
			for k := range all {
				all[k] = true
			}
			every[f.key] = all
		}
		for k, in := range f.inputs {
			all[k] = all[k] && feeds[in]
		}
	}
	cuts := make([][]cut, len(rws))
	for i := range rws {
		f := &forms[i]
		for k, ok := range every[f.key] {
			if !ok {
				continue
			}
			for o := range rws[i].From.Outputs {
				cuts[i] = append(cuts[i], cut{out: o, in: f.inputs[k]})
			}
		}
	}
	return cuts
}

// feedsEveryOutput says, for each input of g, whether every output of g
// is computed from it.
func feedsEveryOutput(g *rules.Graph) []bool {
	from := make([][]bool, len(g.Nodes)) // inputs each node is computed from
	reads := func(v rules.Value, in []bool) {
		if v.IsInput() {
			in[v.Input()] = true
			return
		}
		for j, ok := range from[v.Node] {
			in[j] = in[j] || ok
		}
	}
	for i, n := range g.Nodes {
		from[i] = make([]bool, g.NumInputs)
		for _, a := range n.Args {
			reads(a, from[i])
		}
	}
	feeds := make([]bool, g.NumInputs)
	for j := range feeds {
		feeds[j] = true
	}
	for _, o := range g.Outputs {
		in := make([]bool, g.NumInputs)
		reads(o, in)
		for j := range feeds {
			feeds[j] = feeds[j] && in[j]
		}
	}
	return feeds
}

// cyclic reports whether the match in f surely makes Apply refuse the
// rewrite for a cycle that the host's outputs reach: for some cut, the
// host computes the input from the output's node, along a path through
// no other matched node, so the replacement, which computes that output
// from the input, would be computed from itself. The cycle runs through
// the input, which every replacement output reads, and so is live if
// one of them is: the last matched node is a pattern output, read by no
// matched node, and when it is live its readers keep it so.
//
// It errs towards false: an output node with several outputs (of which
// the path may leave from another), or another matched node on the way,
// leaves the match to Apply.
func (f *finder) cyclic() bool {
	if f.anc == nil || len(f.cuts) == 0 {
		return false
	}
	last := -1
	for _, h := range f.m.Nodes {
		last = max(last, h)
	}
	if !f.anc.Live(last) || !f.outputNode(last) {
		return false
	}
	for _, c := range f.cuts {
		x := f.m.Inputs[c.in]
		o := f.m.Nodes[f.pattern.Outputs[c.out].Node]
		if x.IsInput() || f.host.Nodes[o].Op.Outputs != 1 || !f.anc.Above(o, x.Node) {
			continue
		}
		if !f.matchedBetween(o, x.Node) {
			return true
		}
	}
	return false
}

// outputNode reports whether host node h holds a pattern output.
func (f *finder) outputNode(h int) bool {
	for _, o := range f.pattern.Outputs {
		if f.m.Nodes[o.Node] == h {
			return true
		}
	}
	return false
}

// matchedBetween reports whether a matched node other than o lies on a
// path from host node o to host node x, x itself included.
func (f *finder) matchedBetween(o, x int) bool {
	for _, q := range f.m.Nodes {
		if q != o && f.anc.Above(o, q) && (q == x || f.anc.Above(q, x)) {
			return true
		}
	}
	return false
}
