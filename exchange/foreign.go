package exchange

import (
	"bytes"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"rulebook/rules"
)

// Foreign is a rule set read from a foreign format: TASO's RuleCollection
// protobuf (ReadTASO) or FlexFlow's JSON rendering of it (ReadFlexFlow).
//
// Reading is all or nothing for the file and rule by rule for meaning. A
// file that breaks the schema or its graph structure is an error naming the
// place: malformed data, an operand naming an operator that is not earlier
// in its list, a negative tsId, a rule without mappedOutput, an output
// naming a missing operator. A well-formed rule that means something our
// operators cannot say is skipped with the reason: unknown operators,
// unsupported parameters, a wrong operand count, an output index the
// operator does not have, more than maxOutputs outputs.
type Foreign struct {
	Rules   []Named        // importable rules, in file order
	Skipped []Skip         // rules that could not be imported, with why
	Unknown map[string]int // unknown operator name -> occurrences (in skipped rules)
}

// Named is an imported rule with its name in the file: FlexFlow's "name",
// or "rule N" (counted from 1) where the format has no names. The rule is
// neither oriented nor canonical: the caller decides (r.Oriented()).
type Named struct {
	Name string
	Rule *rules.Rule
}

// Skip is a rule that a reader could not import or a writer could not
// write, and why.
type Skip struct{ Name, Reason string }

// unknownPrefix starts the reason of every rule skipped for unknown
// operators; GroupSkips counts those through Foreign.Unknown instead.
const unknownPrefix = "unknown operators "

// SkipGroup is a set of rules skipped for one reason.
type SkipGroup struct {
	Rules  int
	Reason string
	Names  []string // the rules, in order; nil for unknown operators
}

// GroupSkips groups skipped rules by reason, largest group first. Given
// the unknown-operator counts of a Foreign, the rules skipped for unknown
// operators form one group whose reason lists the operators with their
// occurrences, most frequent first ("unknown operators OP_LINEAR ×562,
// OP_REDUCE ×12").
func GroupSkips(skipped []Skip, unknown map[string]int) []SkipGroup {
	var groups []SkipGroup
	if len(unknown) > 0 {
		names := slices.Collect(maps.Keys(unknown))
		sort.Slice(names, func(i, j int) bool {
			a, b := names[i], names[j]
			return unknown[a] > unknown[b] || unknown[a] == unknown[b] && a < b
		})
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = fmt.Sprintf("%s ×%d", n, unknown[n])
		}
		g := SkipGroup{Reason: unknownPrefix + strings.Join(parts, ", ")}
		for _, s := range skipped {
			if strings.HasPrefix(s.Reason, unknownPrefix) {
				g.Rules++
			}
		}
		groups = append(groups, g)
	}
	index := map[string]int{}
	for _, s := range skipped {
		if len(unknown) > 0 && strings.HasPrefix(s.Reason, unknownPrefix) {
			continue
		}
		i, ok := index[s.Reason]
		if !ok {
			i = len(groups)
			index[s.Reason] = i
			groups = append(groups, SkipGroup{Reason: s.Reason})
		}
		groups[i].Rules++
		groups[i].Names = append(groups[i].Names, s.Name)
	}
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].Rules > groups[j].Rules })
	return groups
}

// SummarizeSkips describes skipped rules in a few lines, one per group of
// GroupSkips: "590 rules with unknown operators: OP_REPLICATE ×866, …",
// then "3 rules: REASON (rule 4, rule 9, rule 12, …)".
func SummarizeSkips(skipped []Skip, unknown map[string]int) []string {
	var lines []string
	for _, g := range GroupSkips(skipped, unknown) {
		if g.Names == nil {
			lines = append(lines, fmt.Sprintf("%d rules with %s", g.Rules, strings.Replace(g.Reason, unknownPrefix, "unknown operators: ", 1)))
			continue
		}
		shown := strings.Join(g.Names[:min(len(g.Names), 3)], ", ")
		if len(g.Names) > 3 {
			shown += ", …"
		}
		lines = append(lines, fmt.Sprintf("%d rules: %s (%s)", g.Rules, g.Reason, shown))
	}
	return lines
}

// ---- the schema TASO's protobuf and FlexFlow's JSON share ----
//
// Both formats are renderings of TASO's RuleCollection: a rule is two
// operator lists (srcOp, dstOp) whose operands name an earlier operator of
// the same list and one of its outputs (opId, tsId), or a graph input (a
// negative opId; inputs are told apart by opId and tsId), plus the list of
// output pairs (mappedOutput). Operator types and parameter keys are TASO's
// numbers; FlexFlow writes the same enums by name.

type xTensor struct {
	op, ts int
	pos    int64
}

type xParam struct {
	key, value int
	name       string // FlexFlow's key name when it is not one of TASO's (key -1)
}

type xOp struct {
	typ  int    // TASO operator type; -1 for a FlexFlow name TASO lacks
	name string // FlexFlow's type name, "" in TASO files
	in   []xTensor
	para []xParam
	pos  int64
}

type xMap struct {
	srcOp, srcTs, dstOp, dstTs int
	pos                        int64
}

type xRule struct {
	name     string // FlexFlow's "name"; "" in TASO files
	src, dst []xOp
	out      []xMap
	pos      int64
}

// TASO's operator types (its old enum; FlexFlow's JSON spells the same
// numbers with these names, and FlexFlow's converter writes type 25 as
// "OP_CONSTANT_POOl", which is read too).
var tasoTypeNames = []string{
	0: "OP_INPUT", 1: "OP_WEIGHT", 2: "OP_ANY", 3: "OP_CONV2D", 4: "OP_DROPOUT", 5: "OP_LINEAR",
	6: "OP_POOL2D_MAX", 7: "OP_POOL2D_AVG", 8: "OP_RELU", 9: "OP_SIGMOID", 10: "OP_TANH",
	11: "OP_BATCHNORM", 12: "OP_CONCAT", 13: "OP_SPLIT", 14: "OP_RESHAPE", 15: "OP_TRANSPOSE",
	16: "OP_EW_ADD", 17: "OP_EW_MUL", 18: "OP_MATMUL", 19: "OP_MUL", 20: "OP_ENLARGE",
	21: "OP_MERGE_GCONV", 22: "OP_CONSTANT_IMM", 23: "OP_CONSTANT_ICONV", 24: "OP_CONSTANT_ONE",
	25: "OP_CONSTANT_POOL", 26: "OP_PARTITION", 27: "OP_COMBINE", 28: "OP_REPLICATE",
	29: "OP_REDUCE", 30: "OP_EMBEDDING",
}

// TASO's operator types for our operators.
const (
	tConv2D    = 3
	tPoolMax   = 6
	tPoolAvg   = 7
	tRelu      = 8
	tConcat    = 12
	tSplit     = 13
	tTranspose = 15
	tEwAdd     = 16
	tEwMul     = 17
	tMatmul    = 18
	tMul       = 19
	tEnlarge   = 20
	tIMatmul   = 22
	tIConv     = 23
	tIEwMul    = 24
	tCPool     = 25
)

var tasoTypeOf = map[string]int{
	"conv2d": tConv2D, "pool_max": tPoolMax, "pool_avg": tPoolAvg, "relu": tRelu,
	"concat": tConcat, "split": tSplit, "transpose": tTranspose, "ewadd": tEwAdd,
	"ewmul": tEwMul, "matmul": tMatmul, "smul": tMul, "enlarge": tEnlarge,
	"I_matmul": tIMatmul, "I_conv": tIConv, "I_ewmul": tIEwMul, "C_pool": tCPool,
}

var ourOpOf = func() map[int]string {
	m := map[int]string{}
	for name, t := range tasoTypeOf {
		m[t] = name
	}
	return m
}()

// typeByName maps FlexFlow type names to TASO's numbers.
var typeByName = func() map[string]int {
	m := map[string]int{"OP_CONSTANT_POOl": tCPool}
	for t, n := range tasoTypeNames {
		m[n] = t
	}
	return m
}()

// Parameter keys (TASO's numbers, FlexFlow's names).
const (
	pmOpType     = 0
	pmNumInputs  = 1
	pmNumOutputs = 2
	pmGroup      = 3
	pmKernelH    = 4
	pmKernelW    = 5
	pmStrideH    = 6
	pmStrideW    = 7
	pmPad        = 8
	pmActi       = 9
	pmNumDim     = 10
	pmAxis       = 11
	pmPerm       = 12
	pmOutShuffle = 13
)

var paramNames = []string{
	"PM_OP_TYPE", "PM_NUM_INPUTS", "PM_NUM_OUTPUTS", "PM_GROUP", "PM_KERNEL_H", "PM_KERNEL_W",
	"PM_STRIDE_H", "PM_STRIDE_W", "PM_PAD", "PM_ACTI", "PM_NUMDIM", "PM_AXIS", "PM_PERM",
	"PM_OUTSHUFFLE", "PM_MERGE_GCONV_COUNT", "PM_PARALLEL_DIM", "PM_PARALLEL_DEGREE",
}

var paramByName = func() map[string]int {
	m := map[string]int{}
	for k, n := range paramNames {
		m[n] = k
	}
	return m
}()

func paramName(p xParam) string {
	if p.key >= 0 && p.key < len(paramNames) {
		return paramNames[p.key]
	}
	if p.name != "" {
		return p.name
	}
	return "key " + strconv.Itoa(p.key)
}

// TASO's activation and padding values.
const (
	tasoActNone    = 0
	tasoActSigmoid = 1
	tasoActRelu    = 2
	tasoActTanh    = 3
	tasoPadSame    = 0
	tasoPadValid   = 1
	// tasoSwap is TASO's index of the permutation (1, 0): permutations are
	// numbered as base-numdim numbers whose digits are the permutation.
	tasoSwap = 2
)

// Defaults for what TASO needs and our rules do not say.
const (
	// defaultKernel is the conv2d kernel height and width written when
	// neither the rule's shapes nor its kernel operand tell (TASO's own
	// rules mostly use 3×3 kernels).
	defaultKernel = 3
	// defaultNumDim is the concat rank written when nothing in the rule
	// fixes it (TASO's activations are 4-D).
	defaultNumDim = 4
)

// maxOutputs bounds the outputs of an imported rule: canonical forms try
// the orders of outputs that look alike, which grows factorially (TASO's
// rules have one or two).
const maxOutputs = 8

// style says how a format names places in a file, for errors.
type style struct {
	file string
	data []byte
	json bool
}

// elem names the i-th element of a list: "srcOp[2]" in JSON, "srcOp 2" in
// protobuf.
func (s style) elem(list string, i int) string {
	if s.json {
		return fmt.Sprintf("%s[%d]", list, i)
	}
	return fmt.Sprintf("%s %d", list, i)
}

// ruleName names rule i (counted from 0) for errors: JSON paths count from
// 0 ("rule[3]"), protobuf errors name rules as imports do ("rule 4").
func (s style) ruleName(i int) string {
	if s.json {
		return fmt.Sprintf("rule[%d]", i)
	}
	return fmt.Sprintf("rule %d", i+1)
}

func (s style) join(path []string) string {
	if s.json {
		return strings.Join(path, ".")
	}
	return strings.Join(path, ": ")
}

func (s style) errorf(pos int64, path []string, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if p := s.join(path); p != "" {
		msg = p + ": " + msg
	}
	if s.json {
		return fmt.Errorf("%s:%s: %s", s.file, position(s.data, pos), msg)
	}
	return fmt.Errorf("%s: byte %d: %s", s.file, pos, msg)
}

// importRules turns decoded rules into ours, or fails on the first
// structural error (see Foreign).
func importRules(reg *rules.Registry, st style, xs []xRule) (*Foreign, error) {
	f := &Foreign{Unknown: map[string]int{}}
	im := importer{reg: reg, st: st}
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
	}
	return f, nil
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
				}
			}
		}
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

// foreignName names an operator type as the file does, for reports.
func (im importer) foreignName(op *xOp) string {
	if im.st.json {
		return op.name
	}
	if op.typ >= 0 && op.typ < len(tasoTypeNames) {
		return fmt.Sprintf("%s (type %d)", tasoTypeNames[op.typ], op.typ)
	}
	return fmt.Sprintf("type %d", op.typ)
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
	if !r.FindShapes(tasoInputShapes()) {
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
			name, ok := ourOpOf[ops[j].typ]
			if ok {
				_, ok = im.reg.Lookup(name)
			}
			if !ok {
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

// tasoInputShapes are the shapes of TASO's input pool, which its rules
// were found with.
func tasoInputShapes() ([]rules.Shape, map[string][]rules.Shape) {
	pool := rules.DefaultPool()
	return pool.Shapes(), pool.Constants
}

// guessGroups settles the groups TASO leaves to the shapes when no shapes
// from its pool fit the rule: depth-wise over a C_pool kernel, else 1.
func guessGroups(r *rules.Rule) {
	for _, g := range []*rules.Graph{&r.Src, &r.Dst} {
		for j := range g.Nodes {
			n := &g.Nodes[j]
			if n.Op.Name != "conv2d" || n.Params[3] != rules.GroupsInferred {
				continue
			}
			n.Params[3] = 1
			if k := n.Args[1]; !k.IsInput() && g.Nodes[k.Node].Op.Name == "C_pool" {
				n.Params[3] = rules.GroupsDepthwise
			}
		}
	}
}

// opParams reads an operator's parameters.
type opParams struct {
	name string // our operator, for reasons
	m    map[int]int
}

func (p opParams) has(key int) bool { _, ok := p.m[key]; return ok }

// operator maps one known operator: our operator, its parameters and the
// operands it keeps, or the reason it cannot be imported.
//
// Operand counts are TASO's (as its generator writes them: pooling and
// enlarge take one operand). A second operand of pooling or enlarge, which
// older TASO code passed only to provide a shape (a weight for pooling, the
// kernel to match for enlarge), is accepted and dropped. Parameters that
// describe shapes rather than values are ignored: conv2d's kernel height
// and width (PM_KERNEL_H/W: the weight's size), concat's PM_NUMDIM, and
// transpose's PM_OUTSHUFFLE (a layout flag: TASO's rules that only change
// it import as identities, X => X). Groups are not written by TASO
// (it infers them from shapes): they are read off the first shapes from
// TASO's input pool under which both sides type-check (rules.FindShapes),
// which also become the rule's input shapes; where none fit, conv2d has
// groups 1, or "dw" over a C_pool kernel. FlexFlow's PM_GROUP is used when
// given.
// Anything our operators cannot express makes the rule unimportable:
// different heights and widths of strides and kernels, activations the
// operator lacks (pooling or matmul with relu, any sigmoid or tanh), a
// transpose that is not the swap of two axes, concat or split with other
// than two parts, and unexpected or missing parameters.
func (im importer) operator(x *xOp) (*rules.Op, []int, []xTensor, string) {
	ours := ourOpOf[x.typ]
	op, _ := im.reg.Lookup(ours)
	p, reason := readParams(ours, x)
	if reason != "" {
		return nil, nil, nil, reason
	}
	params, reason := p.ours(x.typ)
	if reason != "" {
		return nil, nil, nil, reason
	}
	for i, spec := range op.Params {
		if op.Name == "conv2d" && spec.Name == "groups" && params[i] == rules.GroupsInferred {
			continue
		}
		if err := checkParam(spec, params[i]); err != "" {
			return nil, nil, nil, fmt.Sprintf("%s: %s", ours, err)
		}
	}
	_, _, operands := opSchema(x.typ)
	if !slices.Contains(operands, len(x.in)) {
		return nil, nil, nil, fmt.Sprintf("%s: %d operands, expected %d", ours, len(x.in), op.Arity)
	}
	return op, params, x.in[:op.Arity], ""
}

// readParams collects an operator's parameters, refusing unknown,
// repeated, unexpected and missing ones.
func readParams(ours string, x *xOp) (opParams, string) {
	p := opParams{name: ours, m: map[int]int{}}
	allowed, required, _ := opSchema(x.typ)
	for _, q := range x.para {
		switch _, dup := p.m[q.key]; {
		case q.key < 0:
			return p, fmt.Sprintf("%s: unknown parameter %s", ours, paramName(q))
		case dup:
			return p, fmt.Sprintf("%s: parameter %s given twice", ours, paramName(q))
		case !slices.Contains(allowed, q.key):
			return p, fmt.Sprintf("%s: unexpected parameter %s", ours, paramName(q))
		}
		p.m[q.key] = q.value
	}
	for _, k := range required {
		if !p.has(k) {
			return p, fmt.Sprintf("%s: missing parameter %s", ours, paramNames[k])
		}
	}
	return p, ""
}

// ours turns TASO's parameters of an operator type into our parameter
// list, or says why they cannot be expressed.
func (p opParams) ours(typ int) ([]int, string) {
	switch typ {
	case tConv2D:
		return p.conv()
	case tPoolMax, tPoolAvg:
		return p.pool(typ)
	case tConcat:
		if n, ok := p.m[pmNumInputs]; ok && n != 2 {
			return nil, fmt.Sprintf("concat of %d inputs", n)
		}
		axis := p.m[pmAxis]
		if d, ok := p.m[pmNumDim]; ok && axis >= d {
			return nil, fmt.Sprintf("concat: axis %d of a %d-dimensional tensor", axis, d)
		}
		return []int{axis}, ""
	case tSplit:
		if n, ok := p.m[pmNumOutputs]; ok && n != 2 {
			return nil, fmt.Sprintf("split into %d outputs", n)
		}
		return []int{p.m[pmAxis]}, ""
	case tTranspose:
		if d, ok := p.m[pmNumDim]; ok && d != 2 {
			return nil, fmt.Sprintf("transpose of a %d-dimensional tensor", d)
		}
		if perm := p.m[pmPerm]; perm != tasoSwap {
			return nil, fmt.Sprintf("transpose: permutation %d is not the swap of two axes (%d)", perm, tasoSwap)
		}
	case tMatmul:
		_, reason := p.activation(false)
		return nil, reason
	case tEnlarge, tCPool, tIConv:
		kernel, reason := p.square(pmKernelH, pmKernelW, "kernel")
		return []int{kernel}, reason
	}
	return nil, ""
}

// conv reads conv2d's stride, padding, activation and groups; TASO leaves
// groups to the shapes (see guessGroups), FlexFlow may give PM_GROUP.
func (p opParams) conv() ([]int, string) {
	stride, reason := p.square(pmStrideH, pmStrideW, "stride")
	if reason != "" {
		return nil, reason
	}
	pad, reason := p.padding()
	if reason != "" {
		return nil, reason
	}
	act, reason := p.activation(true)
	if reason != "" {
		return nil, reason
	}
	groups := rules.GroupsInferred
	if g, ok := p.m[pmGroup]; ok {
		if g < 1 {
			return nil, fmt.Sprintf("conv2d: PM_GROUP %d", g)
		}
		groups = g
	}
	return []int{stride, pad, act, groups}, ""
}

// pool reads a pooling operator's kernel, stride and padding; TASO's pools
// carry an activation that must be none.
func (p opParams) pool(typ int) ([]int, string) {
	if t, ok := p.m[pmOpType]; ok && t != typ {
		return nil, fmt.Sprintf("%s: PM_OP_TYPE %d disagrees with the operator type", p.name, t)
	}
	kernel, reason := p.square(pmKernelH, pmKernelW, "kernel")
	if reason != "" {
		return nil, reason
	}
	stride, reason := p.square(pmStrideH, pmStrideW, "stride")
	if reason != "" {
		return nil, reason
	}
	pad, reason := p.padding()
	if reason != "" {
		return nil, reason
	}
	if _, reason := p.activation(false); reason != "" {
		return nil, reason
	}
	return []int{kernel, stride, pad}, ""
}

// opSchema lists the parameter keys an operator type may carry, those it
// must carry, and the operand counts accepted (ours first).
func opSchema(typ int) (allowed, required, operands []int) {
	switch typ {
	case tConv2D:
		return []int{pmGroup, pmKernelH, pmKernelW, pmStrideH, pmStrideW, pmPad, pmActi}, []int{pmStrideH, pmStrideW, pmPad}, []int{2}
	case tPoolMax, tPoolAvg:
		return []int{pmOpType, pmKernelH, pmKernelW, pmStrideH, pmStrideW, pmPad, pmActi}, []int{pmKernelH, pmKernelW, pmStrideH, pmStrideW, pmPad}, []int{1, 2}
	case tConcat:
		return []int{pmNumInputs, pmAxis, pmNumDim}, []int{pmAxis}, []int{2}
	case tSplit:
		return []int{pmNumOutputs, pmAxis}, []int{pmAxis}, []int{1}
	case tTranspose:
		return []int{pmNumDim, pmPerm, pmOutShuffle}, []int{pmPerm}, []int{1}
	case tMatmul:
		return []int{pmActi}, nil, []int{2}
	case tEnlarge:
		return []int{pmKernelH, pmKernelW}, []int{pmKernelH, pmKernelW}, []int{1, 2}
	case tCPool, tIConv:
		return []int{pmKernelH, pmKernelW}, []int{pmKernelH, pmKernelW}, []int{0}
	case tIMatmul, tIEwMul:
		return nil, nil, []int{0}
	case tRelu:
		return nil, nil, []int{1}
	}
	return nil, nil, []int{2} // ewadd, ewmul, mul
}

func checkParam(spec rules.ParamSpec, v int) string {
	if spec.Symbols != nil {
		if v < 0 || v >= len(spec.Symbols) {
			return fmt.Sprintf("%s %d", spec.Name, v)
		}
		return ""
	}
	if _, ok := spec.Named[v]; ok || v >= spec.Min && v <= spec.Max {
		return ""
	}
	return fmt.Sprintf("%s %d outside [%d, %d]", spec.Name, v, spec.Min, spec.Max)
}

func (p opParams) square(h, w int, what string) (int, string) {
	if p.m[h] != p.m[w] {
		return 0, fmt.Sprintf("%s: %s height and width differ", p.name, what)
	}
	return p.m[h], ""
}

func (p opParams) padding() (int, string) {
	switch v := p.m[pmPad]; v {
	case tasoPadSame:
		return rules.PadSame, ""
	case tasoPadValid:
		return rules.PadValid, ""
	default:
		return 0, fmt.Sprintf("%s: padding %d", p.name, v)
	}
}

// activation maps PM_ACTI; withRelu says whether the operator has a fused
// relu.
func (p opParams) activation(withRelu bool) (int, string) {
	switch v := p.m[pmActi]; {
	case v == tasoActNone:
		return rules.ActNone, ""
	case v == tasoActRelu && withRelu:
		return rules.ActRelu, ""
	case v == tasoActRelu:
		return 0, fmt.Sprintf("%s with relu activation", p.name)
	case v == tasoActSigmoid:
		return 0, fmt.Sprintf("%s with sigmoid activation", p.name)
	case v == tasoActTanh:
		return 0, fmt.Sprintf("%s with tanh activation", p.name)
	default:
		return 0, fmt.Sprintf("%s: activation %d", p.name, v)
	}
}

// ---- writing ----

// exportRules turns our rules into the shared schema; format names the
// target in reasons. Graph input i becomes opId -(i+1), tsId 0.
func exportRules(rs []*rules.Rule, format string) ([]xRule, []Skip) {
	var out []xRule
	var skipped []Skip
	for i, r := range rs {
		name := fmt.Sprintf("rule %d", i+1)
		x, reason := exportRule(r, format)
		if reason == "" {
			reason = readsBack(r, &x)
		}
		if reason != "" {
			skipped = append(skipped, Skip{Name: name, Reason: reason})
			continue
		}
		x.name = fmt.Sprintf("rulebook_rule_%d", i+1)
		out = append(out, x)
	}
	return out, skipped
}

// readsBack checks that a written rule reads back as the same rule. The
// formats leave convolution groups to the shapes, so a rule whose groups
// TASO's pool of shapes would settle differently cannot be carried.
func readsBack(r *rules.Rule, x *xRule) string {
	back, reason, _ := importer{reg: rules.Default()}.convert(x)
	if reason != "" {
		return "does not read back: " + reason
	}
	_, want := r.Oriented()
	if _, got := back.Oriented(); got.String() != want.String() {
		return "conv2d groups that TASO's shapes do not imply (TASO infers groups from shapes)"
	}
	return ""
}

func exportRule(r *rules.Rule, format string) (xRule, string) {
	var x xRule
	ranks := inferRanks(r)
	tensor := func(v rules.Value) xTensor {
		if v.IsInput() {
			return xTensor{op: -1 - v.Input()}
		}
		return xTensor{op: v.Node, ts: v.Out}
	}
	for s, g := range []*rules.Graph{&r.Src, &r.Dst} {
		if len(g.Outputs) == 0 {
			return x, "a side without outputs"
		}
		for _, o := range g.Outputs {
			if o.IsInput() {
				return x, fmt.Sprintf("an output is a graph input (%s's mappedOutput pairs operators)", format)
			}
		}
		ops := make([]xOp, len(g.Nodes))
		for j, n := range g.Nodes {
			typ, ok := tasoTypeOf[n.Op.Name]
			if !ok {
				return x, fmt.Sprintf("%s has no %s operator type", n.Op.Name, format)
			}
			para, reason := exportParams(r, s, g, j, typ, ranks)
			if reason != "" {
				return x, reason
			}
			ops[j] = xOp{typ: typ, para: para}
			for _, a := range n.Args {
				ops[j].in = append(ops[j].in, tensor(a))
			}
		}
		if s == 0 {
			x.src = ops
		} else {
			x.dst = ops
		}
	}
	for k := range r.Src.Outputs {
		a, b := tensor(r.Src.Outputs[k]), tensor(r.Dst.Outputs[k])
		x.out = append(x.out, xMap{srcOp: a.op, srcTs: a.ts, dstOp: b.op, dstTs: b.ts})
	}
	return x, ""
}

func exportParams(r *rules.Rule, side int, g *rules.Graph, j, typ int, ranks *rankInfo) ([]xParam, string) {
	n := g.Nodes[j]
	kv := func(pairs ...int) []xParam {
		var out []xParam
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, xParam{key: pairs[i], value: pairs[i+1]})
		}
		return out
	}
	pad := func(v int) int {
		if v == rules.PadValid {
			return tasoPadValid
		}
		return tasoPadSame
	}
	switch typ {
	case tConv2D:
		// Groups are not written: TASO infers them from shapes (see readsBack).
		stride, padding, act := n.Params[0], n.Params[1], n.Params[2]
		acti := tasoActNone
		if act == rules.ActRelu {
			acti = tasoActRelu
		}
		h, w := kernelSize(r, g, n.Args[1], 0)
		return kv(pmKernelH, h, pmKernelW, w, pmStrideH, stride, pmStrideW, stride, pmPad, pad(padding), pmActi, acti), ""
	case tPoolMax, tPoolAvg:
		return kv(pmOpType, typ, pmKernelH, n.Params[0], pmKernelW, n.Params[0], pmStrideH, n.Params[1], pmStrideW, n.Params[1],
			pmPad, pad(n.Params[2]), pmActi, tasoActNone), ""
	case tConcat:
		axis := n.Params[0]
		dim := ranks.rank(side, rules.Value{Node: j})
		if dim < 0 {
			dim = defaultNumDim
		}
		dim = max(dim, axis+1)
		return kv(pmNumInputs, 2, pmAxis, axis, pmNumDim, dim), ""
	case tSplit:
		return kv(pmNumOutputs, 2, pmAxis, n.Params[0]), ""
	case tTranspose:
		// PM_OUTSHUFFLE 0: TASO's default, a transpose without a copy.
		return kv(pmNumDim, 2, pmPerm, tasoSwap, pmOutShuffle, 0), ""
	case tMatmul:
		return kv(pmActi, tasoActNone), ""
	case tEnlarge, tCPool, tIConv:
		return kv(pmKernelH, n.Params[0], pmKernelW, n.Params[0]), ""
	}
	return nil, ""
}

// kernelSize infers the height and width of a conv2d kernel operand: from
// the rule's input shapes, the kernel of enlarge, C_pool and I_conv, or
// through operators that keep the spatial size; defaultKernel otherwise.
func kernelSize(r *rules.Rule, g *rules.Graph, v rules.Value, depth int) (int, int) {
	if h, w, ok := kernelSizeOf(r, g, v, depth); ok {
		return h, w
	}
	return defaultKernel, defaultKernel
}

func kernelSizeOf(r *rules.Rule, g *rules.Graph, v rules.Value, depth int) (int, int, bool) {
	if depth > len(g.Nodes) {
		return 0, 0, false
	}
	if v.IsInput() {
		if i := v.Input(); i < len(r.InputShapes) && r.InputShapes[i].Rank == 4 {
			return r.InputShapes[i].Dims[2], r.InputShapes[i].Dims[3], true
		}
		return 0, 0, false
	}
	n := g.Nodes[v.Node]
	switch n.Op.Name {
	case "enlarge", "C_pool", "I_conv":
		return n.Params[0], n.Params[0], true
	case "smul", "split":
		return kernelSizeOf(r, g, n.Args[0], depth+1)
	case "ewadd", "ewmul", "relu":
		for _, a := range n.Args {
			if h, w, ok := kernelSizeOf(r, g, a, depth+1); ok {
				return h, w, true
			}
		}
	case "concat":
		if n.Params[0] < 2 {
			for _, a := range n.Args {
				if h, w, ok := kernelSizeOf(r, g, a, depth+1); ok {
					return h, w, true
				}
			}
		}
	}
	return 0, 0, false
}

// rankInfo infers tensor ranks over both sides of a rule: operands of
// element-wise operators, matmul, concat and split share their result's
// rank, convolution and pooling work on 4-D tensors, transpose on
// matrices, a scalar operand has rank 0, and source and target outputs
// pair up. Matmul's operands are matrices unless something says they are
// batches (rank 3).
type rankInfo struct {
	parent []int
	rankOf []int // at roots: the rank, -1 unknown
	hint   []int // at roots: the rank if nothing fixes it, -1 none
	id     map[[3]int]int
}

func (ri *rankInfo) key(side int, v rules.Value) int {
	k := [3]int{side, v.Node, v.Out}
	if v.IsInput() {
		k = [3]int{-1, v.Input(), 0}
	}
	id, ok := ri.id[k]
	if !ok {
		id = len(ri.parent)
		ri.id[k] = id
		ri.parent = append(ri.parent, id)
		ri.rankOf = append(ri.rankOf, -1)
		ri.hint = append(ri.hint, -1)
	}
	return id
}

func (ri *rankInfo) find(a int) int {
	for ri.parent[a] != a {
		ri.parent[a] = ri.parent[ri.parent[a]]
		a = ri.parent[a]
	}
	return a
}

func (ri *rankInfo) union(a, b int) {
	a, b = ri.find(a), ri.find(b)
	if a == b {
		return
	}
	if ri.rankOf[a] < 0 {
		ri.rankOf[a] = ri.rankOf[b]
	}
	if ri.hint[a] < 0 {
		ri.hint[a] = ri.hint[b]
	}
	ri.parent[b] = a
}

func (ri *rankInfo) fix(a, rank int) {
	if a = ri.find(a); ri.rankOf[a] < 0 {
		ri.rankOf[a] = rank
	}
}

func (ri *rankInfo) rank(side int, v rules.Value) int {
	root := ri.find(ri.key(side, v))
	if ri.rankOf[root] < 0 {
		return ri.hint[root]
	}
	return ri.rankOf[root]
}

func inferRanks(r *rules.Rule) *rankInfo {
	ri := &rankInfo{id: map[[3]int]int{}}
	for i, s := range r.InputShapes {
		ri.fix(ri.key(0, rules.InputValue(i)), s.Rank)
	}
	for side, g := range []*rules.Graph{&r.Src, &r.Dst} {
		for j, n := range g.Nodes {
			outs := make([]int, n.Op.Outputs)
			for o := range outs {
				outs[o] = ri.key(side, rules.Value{Node: j, Out: o})
			}
			args := make([]int, len(n.Args))
			for a, v := range n.Args {
				args[a] = ri.key(side, v)
			}
			switch n.Op.Name {
			case "ewadd", "ewmul", "matmul", "concat", "relu", "split":
				if n.Op.Name == "matmul" {
					ri.hint[ri.find(outs[0])] = 2
				}
				for _, a := range args {
					ri.union(outs[0], a)
				}
				for _, o := range outs[1:] {
					ri.union(outs[0], o)
				}
			case "smul":
				ri.union(outs[0], args[0])
				ri.fix(args[1], 0)
			case "transpose":
				ri.fix(outs[0], 2)
				ri.fix(args[0], 2)
			case "I_matmul":
				ri.fix(outs[0], 2)
			case "conv2d", "pool_avg", "pool_max", "enlarge", "C_pool", "I_conv":
				ri.fix(outs[0], 4)
				for _, a := range args {
					ri.fix(a, 4)
				}
			}
		}
	}
	for k := range r.Src.Outputs {
		if k < len(r.Dst.Outputs) {
			ri.union(ri.key(0, r.Src.Outputs[k]), ri.key(1, r.Dst.Outputs[k]))
		}
	}
	return ri
}

// Formats are the rule file formats Read understands.
var Formats = []string{"json", "sexpr", "taso-pb", "flexflow-json"}

// GuessFormat names the format of a rule file from its extension and, for
// JSON, its content: FlexFlow's files are RuleCollections.
func GuessFormat(name string, data []byte) string {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".pb":
		return "taso-pb"
	case ".json":
		if bytes.Contains(data[:min(len(data), 4096)], []byte(`"RuleCollection"`)) {
			return "flexflow-json"
		}
		return "json"
	}
	return "sexpr"
}

// Read reads a rule file in any of Formats. Rules of rulebook's own formats
// are named "rule N" and come canonical, with their shapes; foreign rules
// come as their readers leave them.
func Read(name string, data []byte, reg *rules.Registry, format string) (*Foreign, error) {
	switch format {
	case "taso-pb":
		return ReadTASO(name, data, reg)
	case "flexflow-json":
		return ReadFlexFlow(name, data, reg)
	case "json", "sexpr":
		texts, err := readOwn(name, data, reg, format)
		if err != nil {
			return nil, err
		}
		f := &Foreign{Unknown: map[string]int{}}
		for i, t := range texts {
			canon, _ := t.Rule().Oriented()
			f.Rules = append(f.Rules, Named{Name: fmt.Sprintf("rule %d", i+1), Rule: canon})
		}
		return f, nil
	}
	return nil, fmt.Errorf("unknown rule file format %q: expected one of %s", format, strings.Join(Formats, ", "))
}

// readOwn reads rulebook's own json or sexpr format, every rule checked.
func readOwn(name string, data []byte, reg *rules.Registry, format string) ([]rules.Text, error) {
	if format == "sexpr" {
		return ReadSexpr(name, data, reg)
	}
	_, texts, err := ReadJSON(name, data)
	if err != nil {
		return nil, err
	}
	for i, t := range texts {
		if texts[i], err = t.Checked(reg); err != nil {
			return nil, fmt.Errorf("%s: rule %d: %w", name, i+1, err)
		}
	}
	return texts, nil
}
