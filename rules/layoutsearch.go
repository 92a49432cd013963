package rules

// layoutSearch enumerates the assignments of input shapes (each input one
// of its candidates) under which a graph type-checks. It works bottom up,
// as a database joins tables: each value of the graph has a table of the
// partial assignments (of the inputs it depends on) under which it
// type-checks, with its shape. A node's table joins its operands' tables.
// Rows are grouped by the shape of the value they give, so a node's shape
// rule runs once per pair of operand shapes, and only the groups it takes
// are joined row by row.
//
// A backtracking search would shape one part of a graph again for every
// assignment of a part that shares no inputs with it: a rule over four
// inputs of 243 layouts each took 14 million shape inferences for 243
// assignments that type-check; joined, it takes about 60 thousand.
type layoutSearch struct {
	g        *Graph
	tab      ShapeTable
	cands    [][]int32 // per input, the ids of its candidate shapes
	tables   map[Value]*layoutTable
	steps    int
	maxSteps int // 0: no limit
	// args and outs are shapeNode's buffers: it runs once per pair of
	// operand shapes, millions of times in a sweep.
	args []Shape
	outs []int32
}

// layoutTable is the partial assignments under which one value
// type-checks, grouped by the id of the value's shape.
type layoutTable struct {
	groups map[int32][]layoutRow
	ids    []int32 // the groups' keys, in the order first found
}

// layoutRow assigns a shape id to each input the value depends on;
// noShape marks the others.
type layoutRow []int32

const noShape = int32(-1)

func (t *layoutTable) add(id int32, r layoutRow) {
	if _, ok := t.groups[id]; !ok {
		t.ids = append(t.ids, id)
	}
	t.groups[id] = append(t.groups[id], r)
}

// eachLayout calls visit with every assignment of input shapes, input i
// taking one of candidates[i], under which g type-checks, until visit
// returns false. An input g never reads takes its first candidate. It
// gives up, reporting false, once the search has shaped and joined more
// than maxSteps times (0: no limit).
func eachLayout(g *Graph, candidates [][]Shape, maxSteps int, visit func(in []Shape) bool) (whole bool) {
	s := &layoutSearch{g: g, tables: map[Value]*layoutTable{}, maxSteps: maxSteps}
	for _, c := range candidates {
		ids := make([]int32, len(c))
		for k, sh := range c {
			ids[k] = s.tab.Intern(sh)
		}
		s.cands = append(s.cands, ids)
	}
	var rows []layoutRow
	if len(g.Outputs) == 0 {
		rows = []layoutRow{s.emptyRow()}
	}
	for k, o := range g.Outputs {
		t, ok := s.table(o)
		if !ok {
			return false
		}
		var next []layoutRow
		for _, id := range t.ids {
			for _, r := range t.groups[id] {
				if k == 0 {
					next = append(next, r)
					continue
				}
				for _, q := range rows {
					if m, ok := merge(q, r); ok {
						next = append(next, m)
					}
				}
			}
		}
		rows = next
	}
	in := make([]Shape, g.NumInputs)
	for _, r := range rows {
		for i, id := range r {
			if id == noShape {
				id = s.cands[i][0]
			}
			in[i] = s.tab.Shape(id)
		}
		if !visit(append([]Shape(nil), in...)) {
			return true
		}
	}
	return true
}

func (s *layoutSearch) emptyRow() layoutRow {
	r := make(layoutRow, s.g.NumInputs)
	for i := range r {
		r[i] = noShape
	}
	return r
}

// table returns the table of a value, building it on first use; ok is
// false once the search ran out of steps.
func (s *layoutSearch) table(v Value) (*layoutTable, bool) {
	if t, ok := s.tables[v]; ok {
		return t, true
	}
	t := &layoutTable{groups: map[int32][]layoutRow{}}
	if v.IsInput() {
		for _, id := range s.cands[v.Input()] {
			r := s.emptyRow()
			r[v.Input()] = id
			t.add(id, r)
		}
		s.tables[v] = t
		return t, true
	}
	n := &s.g.Nodes[v.Node]
	outs := make([]*layoutTable, n.Op.Outputs)
	for k := range outs {
		outs[k] = &layoutTable{groups: map[int32][]layoutRow{}}
	}
	if !s.join(n, outs) {
		return nil, false
	}
	for k, t := range outs {
		s.tables[Value{Node: v.Node, Out: k}] = t
	}
	return outs[v.Out], true
}

// join fills the tables of a node's outputs from its operands' tables.
func (s *layoutSearch) join(n *Node, outs []*layoutTable) bool {
	args := make([]*layoutTable, len(n.Args))
	for k, a := range n.Args {
		t, ok := s.table(a)
		if !ok {
			return false
		}
		args[k] = t
	}
	ids := make([]int32, len(args))
	allowed := make([][]int32, len(args))
	for k, t := range args {
		allowed[k] = s.alone(n, k, t.ids)
	}
	alike := s.byLayout(n, allowed)
	var pick func(k int) bool
	pick = func(k int) bool {
		if k < len(args) {
			choices := allowed[k]
			if k > 0 && alike != nil {
				choices = alike[k][s.tab.Shape(ids[0]).layout()]
			}
			for _, id := range choices {
				ids[k] = id
				if !pick(k + 1) {
					return false
				}
			}
			return true
		}
		if s.steps++; s.maxSteps > 0 && s.steps > s.maxSteps {
			return false
		}
		shapes, ok := s.shapeNode(n, ids)
		if !ok {
			return true
		}
		return s.joinRows(args, ids, 0, s.emptyRow(), func(r layoutRow) {
			for k, id := range shapes {
				outs[k].add(id, r)
			}
		})
	}
	return pick(0)
}

// alone keeps the shape ids operand k may take by itself (Operand.Alone).
func (s *layoutSearch) alone(n *Node, k int, ids []int32) []int32 {
	if k >= len(n.Op.Operands) || n.Op.Operands[k].Alone == nil {
		return ids
	}
	var out []int32
	for _, id := range ids {
		if n.Op.Operands[k].Alone(s.tab.Shape(id)) == nil {
			out = append(out, id)
		}
	}
	return out
}

// byLayout groups the shape ids of each operand after the first by layout,
// for an operator whose operands must be laid out alike; nil otherwise.
func (s *layoutSearch) byLayout(n *Node, ids [][]int32) []map[layout][]int32 {
	if !n.Op.AlikeLayouts {
		return nil
	}
	out := make([]map[layout][]int32, len(ids))
	for k := 1; k < len(ids); k++ {
		out[k] = map[layout][]int32{}
		for _, id := range ids[k] {
			l := s.tab.Shape(id).layout()
			out[k][l] = append(out[k][l], id)
		}
	}
	return out
}

// joinRows emits every merge of one row from each operand's group.
func (s *layoutSearch) joinRows(args []*layoutTable, ids []int32, k int, acc layoutRow, emit func(layoutRow)) bool {
	if k == len(args) {
		emit(acc)
		return true
	}
	for _, r := range args[k].groups[ids[k]] {
		if s.steps++; s.maxSteps > 0 && s.steps > s.maxSteps {
			return false
		}
		if m, ok := merge(acc, r); ok && !s.joinRows(args, ids, k+1, m, emit) {
			return false
		}
	}
	return true
}

// merge combines two partial assignments that agree where both assign.
func merge(a, b layoutRow) (layoutRow, bool) {
	out := make(layoutRow, len(a))
	for i := range a {
		switch {
		case a[i] == noShape:
			out[i] = b[i]
		case b[i] == noShape || b[i] == a[i]:
			out[i] = a[i]
		default:
			return nil, false
		}
	}
	return out, true
}

// shapeNode runs a node's shape rule on operand shape ids.
// The ids it returns are valid until its next call.
func (s *layoutSearch) shapeNode(n *Node, ids []int32) ([]int32, bool) {
	args := s.args[:0]
	for _, id := range ids {
		args = append(args, s.tab.Shape(id))
	}
	if n.Op.IsConstant() && n.ConstShape != nil {
		args = append(args[:0], *n.ConstShape)
	}
	s.args = args
	shapes, err := n.Op.InferShapes(n.Params, args)
	if err != nil {
		return nil, false
	}
	out := s.outs[:0]
	for _, sh := range shapes {
		out = append(out, s.tab.Intern(sh))
	}
	s.outs = out
	return out, true
}

// SourceShapes returns the first assignment of input shapes, each input
// taking one of candidates, under which the rule's source type-checks,
// whatever its target does; ok is false when there is none within
// maxSteps (0: no limit).
func (r *Rule) SourceShapes(candidates []Shape, maxSteps int) (in []Shape, ok bool) {
	per := make([][]Shape, r.NumInputs)
	for i := range per {
		per[i] = candidates
	}
	eachLayout(&r.Src, per, maxSteps, func(found []Shape) bool {
		in, ok = found, true
		return false
	})
	return in, ok
}
