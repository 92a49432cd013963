package rules

import (
	"fmt"
	"slices"
	"strings"

	"github.com/zeebo/xxh3"
)

// Rule is a graph substitution: Src and Dst compute the same outputs,
// position by position, from the same inputs.
type Rule struct {
	NumInputs int
	// InputShapes are the concrete input shapes the rule was found with;
	// empty when unknown (rules themselves are shape-agnostic).
	InputShapes []Shape
	Src, Dst    Graph
	// Conds are the rule's preconditions on its inputs' shapes: the sides
	// agree where all of them hold. Most rules have none.
	Conds []Condition
}

// Text is a rule as it is written, exchanged and stored: the text of its
// two sides and the shapes it was found with. It is the one record of a
// rule outside memory: exchange files hold it (in JSON with these keys),
// the store's rules embed it.
//
// A Text is built by NewText (or Rule.Canonical and Rule.Oriented), which
// parse and check it once: from then on Rule is its parsed rule. A Text
// that arrives as plain fields (decoded from JSON, read from the store)
// is only strings until Checked parses it.
type Text struct {
	// Src and Dst are the two sides ("SRC => DST" joins them), canonical
	// when the Text comes from Canonical or Oriented.
	Src string `json:"src"`
	Dst string `json:"dst"`
	// Inputs lists the input names with their shapes ("?a:2x4 ?b:4x4")
	// when shapes are known.
	Inputs string `json:"inputs,omitempty"`
	// Constants lists the shapes of constant nodes in order of first
	// appearance in the text, when known.
	Constants string `json:"constants,omitempty"`
	// Cond lists the rule's conditions ("(kernel ?b 1 1)"), empty for a
	// rule that holds everywhere; String writes them after " if ".
	Cond string `json:"cond,omitempty"`

	rule *Rule // parsed, with the shapes; nil until checked
}

// NewText parses a rule's two sides and attaches its shapes (inputs and
// constants as Text records them; without input shapes the rule has none),
// or says why they are not a rule over reg's operators.
func NewText(reg *Registry, src, dst, inputs, constants string) (Text, error) {
	t := Text{Src: src, Dst: dst, Inputs: inputs, Constants: constants}
	return checkText(reg, t, t.String())
}

// ParseText is NewText for a rule written whole, "SRC => DST" or "SRC =>
// DST if CONDITIONS": a *SyntaxError's position is one in text.
func ParseText(reg *Registry, text, inputs, constants string) (Text, error) {
	src, dst, cond := splitSides(text)
	return checkText(reg, Text{Src: strings.TrimSpace(src), Dst: strings.TrimSpace(dst), Cond: strings.TrimSpace(cond),
		Inputs: inputs, Constants: constants}, text)
}

// splitSides cuts rule text at its top-level "=>" and "if" atoms. The
// grammar lets parentheses delimit them as well as white space, so a cut
// at " => " would leave "(relu ?a)=>?a" whole in the source.
func splitSides(text string) (src, dst, cond string) {
	l := lexer{src: text, line: 1, col: 1}
	arrow, when, depth := -1, len(text), 0
	for tok := l.next(); tok.text != ""; tok = l.next() {
		start := l.i - len(tok.text)
		switch {
		case tok.text == "(":
			depth++
		case tok.text == ")":
			depth--
		case depth == 0 && arrow < 0 && tok.text == "=>":
			arrow = start
		case depth == 0 && arrow >= 0 && tok.text == "if":
			when = start
		}
		if when < len(text) {
			break
		}
	}
	if arrow < 0 {
		return text, "", ""
	}
	if when == len(text) {
		return text[:arrow], text[arrow+len("=>"):], ""
	}
	return text[:arrow], text[arrow+len("=>") : when], text[when+len("if"):]
}

// checkText parses text, the whole of t, and attaches t's shapes.
func checkText(reg *Registry, t Text, text string) (Text, error) {
	r, err := ParseRule(reg, text)
	if err != nil {
		return Text{}, err
	}
	if t.Inputs != "" {
		if err := r.SetShapes(t.Inputs, t.Constants); err != nil {
			return Text{}, err
		}
	}
	t.rule = r
	return t, nil
}

// Checked parses and checks a Text that arrived as plain fields (see
// NewText), so that Rule can be used.
func (t Text) Checked(reg *Registry) (Text, error) {
	t.rule = nil
	return checkText(reg, t, t.String())
}

// Rule is the parsed rule, with its shapes when the text records them. It
// is shared by every copy of the Text: callers must not change it. Asking
// a Text that was never checked is a programming error, and panics.
func (t Text) Rule() *Rule {
	if t.rule == nil {
		panic("rules: Rule of a Text that was not checked (build it with NewText or Checked)")
	}
	return t.rule
}

// String joins source and target, and the conditions if there are any,
// so that a rule without conditions reads (and hashes) as it always has.
func (t Text) String() string {
	if t.Cond == "" {
		return t.Src + " => " + t.Dst
	}
	return t.Src + " => " + t.Dst + " if " + t.Cond
}

// Hash is the rule's identity: xxh3 of the canonical text.
func (t Text) Hash() string { return fmt.Sprintf("%016x", xxh3.HashString(t.String())) }

// InputName is the canonical name of the i-th input in order of
// appearance ("?a", "?b", …): the name canonical text gives it.
func InputName(i int) string { return inputName(i) }

// inputName is the canonical name of the i-th input in order of appearance.
func inputName(i int) string {
	name := string(rune('a' + i%26))
	if i >= 26 {
		name += fmt.Sprint(i / 26)
	}
	return "?" + name
}

// printer renders both sides of a rule with shared input naming.
type printer struct {
	anonymous  bool // print every input as "?" (order-free keys)
	inputIndex map[int]int
	inputOrder []int
}

type sidePrinter struct {
	p        *printer
	g        *Graph
	bind     map[Value]bool
	names    map[Value]string
	bindings []string
	nodeSeen []bool
	// Nodes are numbered in the order the text shows them, which is the
	// order a parser creates them: bindings first, then the body.
	open         [][]int // node lists of bindings being defined
	bindingNodes []int
	bodyNodes    []int
}

func (sp *sidePrinter) nodeOrder() []int {
	return append(append([]int(nil), sp.bindingNodes...), sp.bodyNodes...)
}

func newSidePrinter(p *printer, g *Graph) *sidePrinter {
	sp := &sidePrinter{p: p, g: g, bind: map[Value]bool{}, names: map[Value]string{}, nodeSeen: make([]bool, len(g.Nodes))}
	refs := map[Value]int{}
	for _, n := range g.Nodes {
		for _, a := range n.Args {
			refs[a]++
		}
	}
	for _, o := range g.Outputs {
		refs[o]++
	}
	for v, c := range refs {
		if !v.IsInput() && c > 1 {
			sp.bind[v] = true
		}
	}
	// An operand of a node printed once per output would be printed twice.
	for i, n := range g.Nodes {
		live := 0
		for out := 0; out < n.Op.Outputs; out++ {
			if refs[Value{i, out}] > 0 {
				live++
			}
		}
		if live > 1 {
			for _, a := range n.Args {
				if !a.IsInput() {
					sp.bind[a] = true
				}
			}
		}
	}
	return sp
}

func (sp *sidePrinter) term(v Value) string {
	if v.IsInput() {
		if sp.p.anonymous {
			return "?"
		}
		idx, ok := sp.p.inputIndex[v.Input()]
		if !ok {
			idx = len(sp.p.inputOrder)
			sp.p.inputIndex[v.Input()] = idx
			sp.p.inputOrder = append(sp.p.inputOrder, v.Input())
		}
		return inputName(idx)
	}
	if !sp.bind[v] || sp.p.anonymous {
		return sp.define(v)
	}
	if name, ok := sp.names[v]; ok {
		return name
	}
	sp.open = append(sp.open, nil)
	def := sp.define(v)
	sp.bindingNodes = append(sp.bindingNodes, sp.open[len(sp.open)-1]...)
	sp.open = sp.open[:len(sp.open)-1]
	name := fmt.Sprintf("%%%d", len(sp.bindings))
	sp.names[v] = name
	sp.bindings = append(sp.bindings, "("+name+" "+def+")")
	return name
}

func (sp *sidePrinter) define(v Value) string {
	n := sp.g.Nodes[v.Node]
	var b strings.Builder
	b.WriteString("(")
	b.WriteString(n.Op.Z3[v.Out])
	for i, p := range n.Params {
		b.WriteString(" ")
		b.WriteString(n.Op.Params[i].Format(p))
	}
	for _, a := range n.Args {
		b.WriteString(" ")
		b.WriteString(sp.term(a))
	}
	b.WriteString(")")
	if !sp.nodeSeen[v.Node] {
		sp.nodeSeen[v.Node] = true
		if k := len(sp.open); k > 0 {
			sp.open[k-1] = append(sp.open[k-1], v.Node)
		} else {
			sp.bodyNodes = append(sp.bodyNodes, v.Node)
		}
	}
	return b.String()
}

func (sp *sidePrinter) side(outputs []int) string {
	terms := make([]string, len(outputs))
	for i, o := range outputs {
		terms[i] = sp.term(sp.g.Outputs[o])
	}
	body := terms[0]
	if len(terms) > 1 {
		body = "(outputs " + strings.Join(terms, " ") + ")"
	}
	if len(sp.bindings) == 0 {
		return body
	}
	return "(let (" + strings.Join(sp.bindings, " ") + ") " + body + ")"
}

// FormatGraph renders a single graph in canonical text, inputs named in
// order of appearance.
func FormatGraph(g *Graph) string {
	p := &printer{inputIndex: map[int]int{}}
	order := make([]int, len(g.Outputs))
	for i := range order {
		order[i] = i
	}
	return newSidePrinter(p, g).side(order)
}

type rendering struct {
	text       string
	src, dst   *sidePrinter
	inputOrder []int
	outputs    []int
}

func (r *Rule) render(outputs []int) rendering {
	p := &printer{inputIndex: map[int]int{}}
	src, dst := newSidePrinter(p, &r.Src), newSidePrinter(p, &r.Dst)
	text, order := renameInTextOrder(src.side(outputs)+" => "+dst.side(outputs), p.inputOrder)
	return rendering{text: text, src: src, dst: dst, inputOrder: order, outputs: outputs}
}

// renameInTextOrder renames inputs so that ?a is the first one the text
// shows, ?b the next, and so on (let bindings print before the body they
// were found in). order maps traversal index to original input; the result
// maps text index to original input.
func renameInTextOrder(text string, order []int) (string, []int) {
	toks := strings.Split(text, " ")
	rename := map[string]string{}
	var newOrder []int
	traversal := map[string]int{}
	for i := range order {
		traversal[inputName(i)] = i
	}
	for i, tok := range toks {
		name := strings.TrimRight(tok, ")")
		if !strings.HasPrefix(name, "?") {
			continue
		}
		nn, ok := rename[name]
		if !ok {
			nn = inputName(len(rename))
			rename[name] = nn
			newOrder = append(newOrder, order[traversal[name]])
		}
		toks[i] = nn + tok[len(name):]
	}
	return strings.Join(toks, " "), newOrder
}

// outputOrders lists the output orders worth trying: outputs are sorted by
// a name-free key and only outputs with equal keys are permuted.
func (r *Rule) outputOrders() [][]int {
	n := len(r.Src.Outputs)
	p := &printer{anonymous: true}
	keys := make([]string, n)
	for i := 0; i < n; i++ {
		keys[i] = newSidePrinter(p, &r.Src).term(r.Src.Outputs[i]) + "|" + newSidePrinter(p, &r.Dst).term(r.Dst.Outputs[i])
	}
	base := make([]int, n)
	for i := range base {
		base[i] = i
	}
	slices.SortStableFunc(base, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
	orders := [][]int{base}
	for start := 0; start < n; {
		end := start + 1
		for end < n && keys[base[end]] == keys[base[start]] {
			end++
		}
		if end-start > 1 {
			var next [][]int
			for _, o := range orders {
				for _, perm := range permutations(o[start:end]) {
					c := slices.Clone(o)
					copy(c[start:end], perm)
					next = append(next, c)
					if len(next) > 5040 {
						break
					}
				}
			}
			orders = next
		}
		start = end
	}
	return orders
}

func permutations(xs []int) [][]int {
	if len(xs) <= 1 {
		return [][]int{slices.Clone(xs)}
	}
	var out [][]int
	for i := range xs {
		rest := append(slices.Clone(xs[:i]), xs[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]int{xs[i]}, p...))
		}
	}
	return out
}

// Canonical returns the rule with inputs, nodes and outputs renumbered in
// canonical order, and its canonical text. Rules equal up to renaming of
// inputs, reordering of nodes or (jointly) of outputs get the same text.
func (r *Rule) Canonical() (*Rule, Text) {
	// Among orders giving the same text (a rule symmetric in some inputs),
	// the recorded shapes decide, so that they are canonical too.
	var best rendering
	var bestShapes, bestCond string
	for i, order := range r.outputOrders() {
		rd := r.render(order)
		shapes := r.shapesInOrder(rd.inputOrder)
		cond := formatConditions(r.Conds, func(old int) int { return slices.Index(rd.inputOrder, old) })
		if i == 0 || rd.text < best.text || rd.text == best.text && (cond < bestCond || cond == bestCond && shapes < bestShapes) {
			best, bestShapes, bestCond = rd, shapes, cond
		}
	}
	c := &Rule{NumInputs: len(best.inputOrder)}
	newInput := map[int]int{}
	for i, old := range best.inputOrder {
		newInput[old] = i
		if len(r.InputShapes) > 0 {
			c.InputShapes = append(c.InputShapes, r.InputShapes[old])
		}
	}
	c.Src = renumber(&r.Src, best.src.nodeOrder(), best.outputs, newInput)
	c.Dst = renumber(&r.Dst, best.dst.nodeOrder(), best.outputs, newInput)
	for _, cd := range r.Conds {
		cd.Input = newInput[cd.Input]
		c.Conds = append(c.Conds, cd)
	}
	slices.SortFunc(c.Conds, compareConditions)
	c.Conds = slices.Compact(c.Conds)
	srcText, dstText, _ := strings.Cut(best.text, " => ")
	t := Text{Src: srcText, Dst: dstText, Cond: bestCond, rule: c}
	if len(c.InputShapes) > 0 {
		parts := make([]string, c.NumInputs)
		for i, s := range c.InputShapes {
			parts[i] = inputName(i) + ":" + s.String()
		}
		t.Inputs = strings.Join(parts, " ")
	}
	t.Constants = constantShapes(c)
	return c, t
}

// shapesInOrder lists the input shapes in the given order, for ties.
func (r *Rule) shapesInOrder(order []int) string {
	if len(r.InputShapes) == 0 {
		return ""
	}
	parts := make([]string, len(order))
	for i, old := range order {
		parts[i] = r.InputShapes[old].String()
	}
	return strings.Join(parts, " ")
}

func renumber(g *Graph, nodeOrder, outputs []int, newInput map[int]int) Graph {
	newNode := map[int]int{}
	for i, old := range nodeOrder {
		newNode[old] = i
	}
	mapValue := func(v Value) Value {
		if v.IsInput() {
			return InputValue(newInput[v.Input()])
		}
		return Value{Node: newNode[v.Node], Out: v.Out}
	}
	out := Graph{NumInputs: len(newInput)}
	for _, old := range nodeOrder {
		n := g.Nodes[old]
		c := Node{Op: n.Op, Params: slices.Clone(n.Params), ConstShape: n.ConstShape}
		for _, a := range n.Args {
			c.Args = append(c.Args, mapValue(a))
		}
		out.Nodes = append(out.Nodes, c)
	}
	for _, o := range outputs {
		out.Outputs = append(out.Outputs, mapValue(g.Outputs[o]))
	}
	return out
}

// constantShapes lists the known shapes of constants, source then target,
// in canonical node order; empty if any is unknown or there are none.
func constantShapes(r *Rule) string {
	var parts []string
	for _, g := range []*Graph{&r.Src, &r.Dst} {
		for _, n := range g.Nodes {
			if !n.Op.IsConstant() {
				continue
			}
			if n.ConstShape == nil {
				return ""
			}
			parts = append(parts, n.ConstShape.String())
		}
	}
	return strings.Join(parts, " ")
}

// Format returns the canonical text of the rule.
func (r *Rule) Format() Text {
	_, t := r.Canonical()
	return t
}

// Oriented returns the canonical form with the larger side as source (ties:
// the smaller text first), so a rule and its mirror image are one rule.
func (r *Rule) Oriented() (*Rule, Text) {
	fwd, ft := r.Canonical()
	mirror := &Rule{NumInputs: r.NumInputs, InputShapes: r.InputShapes, Src: r.Dst, Dst: r.Src, Conds: r.Conds}
	rev, rt := mirror.Canonical()
	fs, rs := len(fwd.Src.Nodes), len(rev.Src.Nodes)
	if rs > fs || (rs == fs && rt.String() < ft.String()) {
		return rev, rt
	}
	return fwd, ft
}

// SetShapes attaches the concrete shapes recorded with a rule's canonical
// text (Text.Inputs and Text.Constants) to a rule parsed from that text.
func (r *Rule) SetShapes(inputs, constants string) error {
	fields := strings.Fields(inputs)
	if len(fields) != r.NumInputs {
		return fmt.Errorf("shapes: %d input shapes for %d inputs", len(fields), r.NumInputs)
	}
	r.InputShapes = make([]Shape, len(fields))
	for i, f := range fields {
		name, dims, ok := strings.Cut(f, ":")
		if !ok || name != inputName(i) {
			return fmt.Errorf("shapes: expected %s:DIMS, got %q", inputName(i), f)
		}
		s, err := ParseDims(dims)
		if err != nil {
			return fmt.Errorf("shapes: %s: %w", name, err)
		}
		r.InputShapes[i] = s
	}
	consts := strings.Fields(constants)
	k := 0
	for _, g := range []*Graph{&r.Src, &r.Dst} {
		for j := range g.Nodes {
			if !g.Nodes[j].Op.IsConstant() {
				continue
			}
			if k >= len(consts) {
				return fmt.Errorf("shapes: too few constant shapes (%d)", len(consts))
			}
			s, err := ParseDims(consts[k])
			if err != nil {
				return fmt.Errorf("shapes: constant %d: %w", k, err)
			}
			g.Nodes[j].ConstShape = &s
			k++
		}
	}
	if k != len(consts) {
		return fmt.Errorf("shapes: %d constant shapes for %d constants", len(consts), k)
	}
	return nil
}
