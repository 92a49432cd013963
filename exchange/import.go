package exchange

import (
	"fmt"
	"slices"
	"strings"

	"rulebook/rules"
)

// importRules turns decoded rules into ours, or fails on the first
// structural error (see Foreign).
func importRules(reg *rules.Registry, st style, xs []xRule) (*Foreign, error) {
	f := &Foreign{Unknown: map[string]int{}}
	im := importer{reg: reg, st: st}
	dropped := 0
	for i := range xs {
		x := &xs[i]
		name := x.name
		if name == "" {
			name = fmt.Sprintf("rule %d", i+1)
		}
		if err := im.check(i, x); err != nil {
			return nil, err
		}
		r, reason, unknown := im.convert(x)
		if reason != "" {
			f.Skipped = append(f.Skipped, Skip{Name: name, Reason: reason})
			for _, u := range unknown {
				f.Unknown[u]++
			}
			continue
		}
		f.Rules = append(f.Rules, Named{Name: name, Rule: r})
		dropped += im.droppedReplicaDims(x)
	}
	if dropped > 0 {
		f.Notes = append(f.Notes, fmt.Sprintf("%s of OP_REPLICATE and OP_REDUCE read and dropped (%d operators): our tensors have one replica dimension", rules.PMParallelDim, dropped))
	}
	return f, nil
}

// droppedReplicaDims counts the replicate and reduce operators of a rule
// that name a dimension, which our single replica dimension does not need.
func (im importer) droppedReplicaDims(x *xRule) int {
	n := 0
	for _, ops := range [][]xOp{x.src, x.dst} {
		for j := range ops {
			op, ok := im.lookup(&ops[j])
			if !ok || !op.Keys.DropsDim {
				continue
			}
			for _, q := range ops[j].para {
				if q.key == rules.PMParallelDim {
					n++
				}
			}
		}
	}
	return n
}

type importer struct {
	reg *rules.Registry
	st  style
}

// check verifies the structure of a rule.
func (im importer) check(i int, x *xRule) error {
	rule := im.st.ruleName(i)
	who := "" // JSON paths count rules from 0: name the rule too
	if x.name != "" && im.st.json {
		who = fmt.Sprintf(" (rule %q)", x.name)
	}
	fail := func(pos int64, path []string, format string, args ...any) error {
		return im.st.errorf(pos, path, "%s%s", fmt.Sprintf(format, args...), who)
	}
	for _, side := range []struct {
		name string
		ops  []xOp
	}{{"srcOp", x.src}, {"dstOp", x.dst}} {
		if len(side.ops) > rules.MaxNodes {
			return fail(side.ops[rules.MaxNodes].pos, []string{rule, im.st.elem(side.name, rules.MaxNodes)}, "more than %d operators in %s (rulebook's limit)", rules.MaxNodes, side.name)
		}
		depth := make([]int, len(side.ops)) // the longest chain of operators ending at each
		for j, op := range side.ops {
			for k, t := range op.in {
				path := []string{rule, im.st.elem(side.name, j), im.st.elem("input", k)}
				switch {
				case t.ts < 0:
					return fail(t.pos, path, "expected a tsId >= 0, got %d", t.ts)
				case t.op >= len(side.ops):
					return fail(t.pos, path, "opId %d: there is no operator %d in %s (%d operators)", t.op, t.op, side.name, len(side.ops))
				case t.op >= j:
					return fail(t.pos, path, "opId %d: expected an operator earlier in %s than %d", t.op, side.name, j)
				case t.op >= 0:
					depth[j] = max(depth[j], depth[t.op])
				}
			}
			if depth[j]++; depth[j] > rules.MaxDepth {
				return fail(op.pos, []string{rule, im.st.elem(side.name, j)}, "a chain of more than %d operators (rulebook's limit)", rules.MaxDepth)
			}
		}
	}
	if err := im.checkDegrees(x, rule, fail); err != nil {
		return err
	}
	if len(x.out) == 0 {
		return fail(x.pos, []string{rule}, "expected at least one mappedOutput")
	}
	for k, m := range x.out {
		path := []string{rule, im.st.elem("mappedOutput", k)}
		switch {
		case m.srcOp >= len(x.src):
			return fail(m.pos, path, "srcOpId %d: srcOp has %d operators", m.srcOp, len(x.src))
		case m.dstOp >= len(x.dst):
			return fail(m.pos, path, "dstOpId %d: dstOp has %d operators", m.dstOp, len(x.dst))
		case m.srcTs < 0 || m.dstTs < 0:
			return fail(m.pos, path, "expected tsIds >= 0, got %d and %d", m.srcTs, m.dstTs)
		}
	}
	return nil
}

// checkDegrees refuses a parallel operator without a degree, or with a
// degree below 1: FlexFlow applies its rules at the machine's degree, so a
// rule that does not say where it writes its degree is not a rule we can
// judge, and the file is wrong rather than beyond our operators.
func (im importer) checkDegrees(x *xRule, rule string, fail func(int64, []string, string, ...any) error) error {
	for _, side := range []struct {
		name string
		ops  []xOp
	}{{"srcOp", x.src}, {"dstOp", x.dst}} {
		for j := range side.ops {
			op, ok := im.lookup(&side.ops[j])
			if !ok || !hasDegree(op) {
				continue
			}
			path := []string{rule, im.st.elem(side.name, j)}
			degree, given := -1, false
			for _, q := range side.ops[j].para {
				if q.key == rules.PMParallelDegree {
					degree, given = q.value, true
				}
			}
			if !given {
				return fail(side.ops[j].pos, path, "%s lacks %s", im.foreignName(&side.ops[j]), rules.PMParallelDegree)
			}
			if degree < 1 || degree > rules.MaxDegree {
				return fail(side.ops[j].pos, path, "%s %s %d: expected a degree from 1 to %d", im.foreignName(&side.ops[j]), rules.PMParallelDegree, degree, rules.MaxDegree)
			}
		}
	}
	return nil
}

// hasDegree reports whether an operator takes a parallel degree.
func hasDegree(op *rules.Op) bool {
	for _, p := range op.Params {
		if p.Degree {
			return true
		}
	}
	return false
}

// foreignName names an operator type as the file does, for reports.
func (im importer) foreignName(op *xOp) string {
	if im.st.json {
		return op.name
	}
	if name, ok := rules.TASOTypeName(op.typ); ok {
		return fmt.Sprintf("%s (type %d)", name, op.typ)
	}
	return fmt.Sprintf("type %d", op.typ)
}

// lookup finds our operator of a file's operator type, by the registry's
// TASO or FlexFlow form.
func (im importer) lookup(op *xOp) (*rules.Op, bool) {
	if im.st.json {
		return im.reg.LookupFlexFlow(op.name)
	}
	return im.reg.LookupTASO(op.typ)
}

// convert builds our rule, or says why it cannot (and which operators are
// unknown). Graph inputs are numbered in order of first appearance, source
// first; identical operator applications on one side are merged, as the
// text parser merges them, so that the canonical text reads back the same.
func (im importer) convert(x *xRule) (*rules.Rule, string, []string) {
	if unknown := im.unknownOps(x); len(unknown) > 0 {
		distinct := slices.Clone(unknown)
		slices.Sort(distinct)
		return nil, unknownPrefix + strings.Join(slices.Compact(distinct), ", "), unknown
	}
	if len(x.out) > maxOutputs {
		return nil, fmt.Sprintf("more than %d outputs", maxOutputs), nil
	}
	in := inputNumbering{}
	var graphs [2]rules.Graph
	for side, ops := range [][]xOp{x.src, x.dst} {
		g, reason := im.side(ops, x.out, side, in)
		if reason != "" {
			return nil, reason, nil
		}
		graphs[side] = *g
	}
	r := &rules.Rule{NumInputs: len(in), Src: graphs[0], Dst: graphs[1]}
	r.Src.NumInputs, r.Dst.NumInputs = r.NumInputs, r.NumInputs
	switch {
	case r.UsesParallelOps():
		// The parallel pool's shapes leave a convolution's groups as the
		// formats do: to the operands.
		findParallelShapes(r)
		guessGroups(r)
	case !r.FindShapes(tasoInputShapes()):
		guessGroups(r)
	}
	for _, g := range []*rules.Graph{&r.Src, &r.Dst} {
		if err := g.Validate(); err != nil {
			return nil, err.Error(), nil
		}
	}
	return r, "", nil
}

// unknownOps names the operators of a rule we do not have.
func (im importer) unknownOps(x *xRule) []string {
	var unknown []string
	for _, ops := range [][]xOp{x.src, x.dst} {
		for j := range ops {
			if _, ok := im.lookup(&ops[j]); !ok {
				unknown = append(unknown, im.foreignName(&ops[j]))
			}
		}
	}
	return unknown
}

// inputNumbering numbers a rule's graph inputs, (opId, tsId) with a
// negative opId, in order of first appearance across both sides.
type inputNumbering map[[2]int]int

func (in inputNumbering) value(t xTensor) rules.Value {
	key := [2]int{t.op, t.ts}
	i, ok := in[key]
	if !ok {
		i = len(in)
		in[key] = i
	}
	return rules.InputValue(i)
}

// side builds one side of a rule (0 source, 1 target) with its outputs.
func (im importer) side(ops []xOp, out []xMap, side int, in inputNumbering) (*rules.Graph, string) {
	g := &rules.Graph{}
	seen := map[string]int{}
	nodeOf := make([]int, len(ops))
	ref := func(opID, ts int, what string) (rules.Value, string) {
		if opID < 0 {
			return in.value(xTensor{op: opID, ts: ts}), ""
		}
		v := rules.Value{Node: nodeOf[opID], Out: ts}
		if from := g.Nodes[v.Node].Op; ts >= from.Outputs {
			return v, fmt.Sprintf("%s has %d outputs, %s uses output %d", from.Name, from.Outputs, what, ts)
		}
		return v, ""
	}
	for j := range ops {
		op, params, operands, reason := im.operator(&ops[j])
		if reason != "" {
			return nil, reason
		}
		n := rules.Node{Op: op, Params: params}
		for _, t := range operands {
			v, reason := ref(t.op, t.ts, "an operand")
			if reason != "" {
				return nil, reason
			}
			n.Args = append(n.Args, v)
		}
		key := fmt.Sprint(op.Name, n.Params, n.Args)
		if idx, ok := seen[key]; ok {
			nodeOf[j] = idx
			continue
		}
		seen[key] = len(g.Nodes)
		nodeOf[j] = len(g.Nodes)
		g.Nodes = append(g.Nodes, n)
	}
	for _, m := range out {
		opID, ts := m.srcOp, m.srcTs
		if side == 1 {
			opID, ts = m.dstOp, m.dstTs
		}
		v, reason := ref(opID, ts, "mappedOutput")
		if reason != "" {
			return nil, reason
		}
		g.Outputs = append(g.Outputs, v)
	}
	return g, ""
}

// operator maps one known operator: our operator, its parameters and the
// operands it keeps, or the reason it cannot be imported.
//
// Operand counts are TASO's. An extra operand of pooling or enlarge, which
// older TASO code passed only for its shape, is dropped. Parameters that
// describe shapes rather than values are ignored: conv2d's kernel height
// and width, concat's PM_NUMDIM, and transpose's PM_OUTSHUFFLE (a layout
// flag, so rules that only change it import as X => X).
//
// TASO does not write conv2d's groups. They are read off the first shapes
// of TASO's pool under which both sides type-check (rules.FindShapes);
// where none fit, groups are 1, or "dw" over a C_pool kernel. FlexFlow's
// PM_GROUP is used when given.
//
// A rule our operators cannot express is unimportable. Examples: unequal
// strides or kernel sides, activations the operator lacks, a transpose
// that is not a swap of two axes, a concat or split in other than two
// parts, and unexpected or missing parameters.
func (im importer) operator(x *xOp) (*rules.Op, []int, []xTensor, string) {
	op, _ := im.lookup(x)
	keys, reason := im.readParams(op, x)
	if reason != "" {
		return nil, nil, nil, reason
	}
	params, err := op.DecodeKeys(keys)
	if err != nil {
		return nil, nil, nil, err.Error()
	}
	if !slices.Contains(operandCounts(op), len(x.in)) {
		return nil, nil, nil, fmt.Sprintf("%s: %d operands, expected %d", op.Name, len(x.in), op.Arity)
	}
	return op, params, x.in[:op.Arity], ""
}

// readParams collects an operator's parameters, refusing unknown,
// repeated, unexpected and missing ones. Which keys the operator may and
// must carry is in its TASO and FlexFlow forms.
func (im importer) readParams(op *rules.Op, x *xOp) (map[rules.TASOParam]int, string) {
	keys := map[rules.TASOParam]int{}
	for _, q := range x.para {
		switch _, dup := keys[q.key]; {
		case q.key < 0:
			return nil, fmt.Sprintf("%s: unknown parameter %s", op.Name, paramName(q))
		case dup:
			return nil, fmt.Sprintf("%s: parameter %s given twice", op.Name, paramName(q))
		case !im.allowed(op, q):
			return nil, fmt.Sprintf("%s: unexpected parameter %s", op.Name, paramName(q))
		}
		keys[q.key] = q.value
	}
	for _, k := range requiredParams(op) {
		if _, ok := keys[k]; !ok {
			return nil, fmt.Sprintf("%s: missing parameter %s", op.Name, k)
		}
	}
	return keys, ""
}

// operandCounts are the operand counts an operator accepts: TASO's, or
// FlexFlow's for the operators TASO lacks (the parallel ones).
func operandCounts(op *rules.Op) []int {
	if op.TASO.None {
		return op.FlexFlow.Operands
	}
	return op.TASO.Operands
}

// requiredParams are the keys an operator must carry: TASO's, or
// FlexFlow's for the operators TASO lacks.
func requiredParams(op *rules.Op) []rules.TASOParam {
	if !op.TASO.None {
		return op.TASO.Required
	}
	var out []rules.TASOParam
	for _, name := range op.FlexFlow.Required {
		if k, ok := rules.TASOParamNamed(name); ok {
			out = append(out, k)
		}
	}
	return out
}

// allowed reports whether an operator may carry a parameter: one of its
// TASO keys, or in FlexFlow's JSON one of its FlexFlow names.
func (im importer) allowed(op *rules.Op, q xParam) bool {
	if im.st.json {
		return slices.Contains(op.FlexFlow.Params, q.name)
	}
	return slices.Contains(op.TASO.Params, q.key)
}
