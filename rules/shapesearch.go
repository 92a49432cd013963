package rules

// GroupsInferred is a conv2d groups value that only importers use: the
// groups follow from the shapes, as in TASO, until FindShapes fixes them.
// It is never stored or printed.
const GroupsInferred = -1

// FindShapes looks for input shapes, taken from inputs, and constant
// shapes, taken from constants by operator name, under which both sides of
// the rule type-check. It records the first it finds in r.InputShapes and
// the constants' ConstShape, replaces inferred convolution groups by the
// ones those shapes imply, and reports whether it found any.
func (r *Rule) FindShapes(inputs []Shape, constants map[string][]Shape) bool {
	s := &shapeSearch{r: r, inputs: inputs, constants: constants,
		assigned: make([]bool, r.NumInputs), in: make([]Shape, r.NumInputs),
		out: [2][][]Shape{make([][]Shape, len(r.Src.Nodes)), make([][]Shape, len(r.Dst.Nodes))}}
	if !s.node(0, 0) {
		return false
	}
	r.InputShapes = s.in
	for side, g := range []*Graph{&r.Src, &r.Dst} {
		for j := range g.Nodes {
			n := &g.Nodes[j]
			if n.Op.IsConstant() {
				cs := s.out[side][j][0]
				n.ConstShape = &cs
			}
			if _, conv := n.Op.Attrs.(ConvAttrs); conv {
				if a := ConvOf(n.Params); a.Groups == GroupsInferred {
					a.Groups = impliedGroups(s.shapeOf(side, n.Args[0]), s.shapeOf(side, n.Args[1]))
					n.Params = a.Params() // a fresh slice: the node's may be shared
				}
			}
		}
	}
	return true
}

// impliedGroups names the grouping a convolution of x by kernel w has:
// ordinary, depth-wise, or a number of groups.
func impliedGroups(x, w Shape) int {
	switch g := x.Dims[1] / w.Dims[1]; {
	case g == 1:
		return 1
	case w.Dims[1] == 1:
		return GroupsDepthwise
	default:
		return g
	}
}

// shapeSearch backtracks over the shapes of inputs and constants in the
// order the graphs need them, source nodes first, checking each node as
// soon as its operands have shapes.
type shapeSearch struct {
	r         *Rule
	inputs    []Shape
	constants map[string][]Shape
	assigned  []bool
	in        []Shape
	out       [2][][]Shape
	// perInput, when set, replaces inputs with a list for each input.
	perInput [][]Shape
	// visit, when set, is called for every assignment under which both
	// sides type-check, until it returns false; the search then reports
	// false so that it goes on to the next assignment.
	visit func() bool
	// stopped is set once visit returned false or steps ran out.
	stopped  bool
	steps    int
	maxSteps int // 0: no limit
}

// EachShapes calls visit with r.InputShapes and the constants' ConstShape
// set, for each assignment of input shapes (input i takes one of
// candidates[i]; constants one of constants by operator name) under which
// both sides type-check and agree on output shapes, in the order of the
// candidates, until visit returns false or maxSteps nodes have been shaped.
// It leaves r's shapes as the last visit saw them; a caller that needs the
// original ones restores them.
func (r *Rule) EachShapes(candidates [][]Shape, constants map[string][]Shape, maxSteps int, visit func() bool) {
	s := &shapeSearch{r: r, perInput: candidates, constants: constants, visit: visit, maxSteps: maxSteps,
		assigned: make([]bool, r.NumInputs), in: make([]Shape, r.NumInputs),
		out: [2][][]Shape{make([][]Shape, len(r.Src.Nodes)), make([][]Shape, len(r.Dst.Nodes))}}
	s.node(0, 0)
}

func (s *shapeSearch) graph(side int) *Graph {
	if side == 0 {
		return &s.r.Src
	}
	return &s.r.Dst
}

func (s *shapeSearch) shapeOf(side int, v Value) Shape {
	if v.IsInput() {
		return s.in[v.Input()]
	}
	return s.out[side][v.Node][v.Out]
}

// node shapes node j of a side and everything after it.
func (s *shapeSearch) node(side, j int) bool {
	if s.steps++; s.maxSteps > 0 && s.steps > s.maxSteps {
		s.stopped = true
	}
	if s.stopped {
		return false
	}
	if j == len(s.graph(side).Nodes) {
		if side == 0 {
			return s.node(1, 0)
		}
		return s.outputsAgree()
	}
	n := &s.graph(side).Nodes[j]
	for _, a := range n.Args {
		if a.IsInput() && !s.assigned[a.Input()] {
			return s.assign(a.Input(), side, j)
		}
	}
	if n.Op.IsConstant() {
		for _, c := range s.constants[n.Op.Name] {
			if out, err := n.Op.InferShapes(n.Params, []Shape{c}); err == nil {
				s.out[side][j] = out
				if s.node(side, j+1) {
					return true
				}
			}
		}
		return false
	}
	args := make([]Shape, len(n.Args))
	for k, a := range n.Args {
		args[k] = s.shapeOf(side, a)
	}
	out, err := n.Op.InferShapes(n.Params, args)
	if err != nil {
		return false
	}
	s.out[side][j] = out
	return s.node(side, j+1)
}

// assign tries each shape for input i, then resumes at node j.
func (s *shapeSearch) assign(i, side, j int) bool {
	s.assigned[i] = true
	defer func() { s.assigned[i] = false }()
	candidates := s.inputs
	if s.perInput != nil {
		candidates = s.perInput[i]
	}
	for _, sh := range candidates {
		if s.stopped {
			return false
		}
		s.in[i] = sh
		if s.node(side, j) {
			return true
		}
	}
	return false
}

func (s *shapeSearch) outputsAgree() bool {
	for k := range s.r.Src.Outputs {
		if !s.shapeOf(0, s.r.Src.Outputs[k]).SameDims(s.shapeOf(1, s.r.Dst.Outputs[k])) {
			return false
		}
	}
	for i, ok := range s.assigned {
		switch {
		case ok:
		case s.perInput != nil:
			s.in[i] = s.perInput[i][0] // an input neither side reads
		case len(s.inputs) > 0:
			s.in[i] = s.inputs[0]
		}
	}
	if s.visit == nil {
		return true
	}
	s.setConstShapes()
	s.r.InputShapes = s.in
	if !s.visit() {
		s.stopped = true
	}
	return false
}

// setConstShapes records the shapes the search gave the constants.
func (s *shapeSearch) setConstShapes() {
	for side, g := range []*Graph{&s.r.Src, &s.r.Dst} {
		for j := range g.Nodes {
			if n := &g.Nodes[j]; n.Op.IsConstant() {
				cs := s.out[side][j][0]
				n.ConstShape = &cs
			}
		}
	}
}

// LayoutVariants returns every layout of each base shape at one degree d:
// each dimension whole or cut in d pieces, and a replica dimension of none,
// d partial sums, d copies, d partial sums of d copies each, d² partial
// sums or d² copies (what two replicates or a sharded product leave). The
// plainest layouts come first (fewest factors of d), so that a search that
// takes the first fit records the plainest.
func LayoutVariants(bases []Shape, degree int) []Shape {
	replicas := [][2]int{{1, 1}, {degree, 1}, {1, degree}, {degree, degree}, {degree * degree, 1}, {1, degree * degree}}
	factors := func(sum, copies int) int {
		n := 0
		for _, f := range []int{sum, copies} {
			for ; f > 1; f /= degree {
				n++
			}
		}
		return n
	}
	var out []Shape
	for want := 0; want <= MaxRank+2; want++ {
		for _, b := range bases {
			for cuts := 0; cuts < 1<<b.Rank; cuts++ {
				for _, rep := range replicas {
					if bitCount(cuts)+factors(rep[0], rep[1]) != want {
						continue
					}
					s := b.Plain()
					for i := 0; i < b.Rank; i++ {
						if cuts&(1<<i) != 0 {
							s.Degrees[i] = degree
						}
					}
					s.Sum, s.Copy = rep[0], rep[1]
					s.normalizeLayout()
					if s.CheckLayout() == nil {
						out = append(out, s)
					}
				}
			}
		}
	}
	return out
}

func bitCount(x int) int {
	n := 0
	for ; x > 0; x &= x - 1 {
		n++
	}
	return n
}

// FindLayouts is FindShapes over layouts: each input takes one of inputs
// (LayoutVariants gives them), and the search gives up after maxSteps
// nodes (0: no limit), as a rule that type-checks nowhere would otherwise
// try every combination of its inputs' layouts.
func (r *Rule) FindLayouts(inputs []Shape, maxSteps int) bool {
	s := &shapeSearch{r: r, inputs: inputs, maxSteps: maxSteps,
		assigned: make([]bool, r.NumInputs), in: make([]Shape, r.NumInputs),
		out: [2][][]Shape{make([][]Shape, len(r.Src.Nodes)), make([][]Shape, len(r.Dst.Nodes))}}
	if !s.node(0, 0) {
		return false
	}
	r.InputShapes = s.in
	return true
}
