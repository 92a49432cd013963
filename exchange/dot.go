package exchange

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"slices"
	"strings"

	"rulebook/rules"
	"rulebook/store"
)

// Picture is a set of rules to draw with Graphviz (see WriteDot).
type Picture struct {
	// Title heads the drawing ("version v1 (hash …): 3 of 451 rules");
	// empty for none.
	Title string
	Rules []PictureRule
}

// PictureRule is one rule of a Picture.
type PictureRule struct {
	// ID is the rule's id in the store: its caption starts "rule ID".
	ID int64
	// Note follows the id in the caption ("#12 of 451 in v1, hash …").
	Note string
	Text rules.Text
}

// MaxPictureRules is the most rules one picture holds. Rules are drawn one
// below the other, a ≤3-operator rule some 300 to 600 pixels high: many
// more and a PNG would pass Graphviz's 32767-pixel limit, which shrinks
// the whole picture until its text is illegible.
const MaxPictureRules = 40

// RulePicture draws one stored rule, captioned with its id, status and
// content hash.
func RulePicture(r store.Rule) Picture {
	return Picture{Rules: []PictureRule{{ID: r.ID, Note: fmt.Sprintf("%s, hash %s", r.Status, r.Hash), Text: r.Text}}}
}

// versionPicture draws the rules of version v that sel picked from all,
// each captioned with its place in the version.
func versionPicture(v store.Version, all, picked []store.Rule) Picture {
	place := make(map[int64]int, len(all))
	for i, r := range all {
		place[r.ID] = i + 1
	}
	title := fmt.Sprintf("version %s (hash %.12s): %d of %d rules", v.Tag, v.Hash, len(picked), len(all))
	p := Picture{Title: title}
	for _, r := range picked {
		note := fmt.Sprintf("#%d of %d in %s, hash %s", place[r.ID], len(all), v.Tag, r.Hash)
		p.Rules = append(p.Rules, PictureRule{ID: r.ID, Note: note, Text: r.Text})
	}
	return p
}

// WriteDot draws the rules of p one below the other, each as two graphs
// side by side: the source on the left, "=>", the target on the right,
// data flowing down from the inputs to the outputs. Operators show their
// named parameters, inputs their shapes, and edges the shape of the
// tensor they carry and, where order matters, the operand it feeds.
func WriteDot(w io.Writer, reg *rules.Registry, p Picture) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "digraph rules {")
	fmt.Fprintln(bw, "  ranksep=0.3; nodesep=0.25;")
	fmt.Fprintln(bw, "  fontname=\"Helvetica\"; labeljust=l; labelloc=t;")
	fmt.Fprintln(bw, "  node [shape=box, style=rounded, fontname=\"Helvetica\", fontsize=12, height=0.3, margin=\"0.08,0.03\"];")
	fmt.Fprintln(bw, "  edge [fontname=\"Helvetica\", fontsize=10, fontcolor=\"gray25\", arrowsize=0.6];")
	if p.Title != "" {
		fmt.Fprintf(bw, "  label=%s; fontsize=16;\n", dotQuote(p.Title))
	}
	var above *dotRule
	for k, r := range p.Rules {
		checked, err := r.Text.Checked(reg)
		if err != nil {
			return fmt.Errorf("rule %d: %w", r.ID, err)
		}
		name := fmt.Sprintf("r%d", r.ID)
		if r.ID == 0 {
			name = fmt.Sprintf("k%d", k)
		}
		caption := fmt.Sprintf("rule %d", r.ID)
		if r.Note != "" {
			caption += " (" + r.Note + ")"
		}
		rule := newDotRule(name, checked.Rule())
		rule.write(bw, caption)
		if above != nil {
			// Rank each rule below the one before it.
			fmt.Fprintf(bw, "  %s -> %s [style=invis];\n", above.divider(above.rows), rule.divider(0))
		}
		above = &rule
	}
	fmt.Fprintln(bw, "}")
	return bw.Flush()
}

// dotRule draws one rule as a cluster of rows: a title row ("source",
// "target"), the inputs, the operators by depth, the outputs. In every
// row an invisible divider sits between the source's nodes and the
// target's, tied to both by edges within the row, which Graphviz keeps
// pointing left to right: so the source is on the left, the target on the
// right, and neither strays across (TestGraphvizLaysOutEveryRule checks
// it). The sides are not clusters of their own: Graphviz does not keep
// that order between clusters. The middle divider shows "=>".
type dotRule struct {
	name     string // node name prefix: "r53"
	src, dst dotSide
	rows     int // the last row: the outputs
}

func newDotRule(name string, r *rules.Rule) dotRule {
	d := dotRule{name: name,
		src: dotSide{name: name + "_src", r: r, g: &r.Src},
		dst: dotSide{name: name + "_dst", r: r, g: &r.Dst}}
	d.rows = max(d.src.depth(), d.dst.depth()) + 2
	return d
}

// divider names the divider of row k; the middle one is the arrow.
func (d dotRule) divider(k int) string {
	if k == d.rows/2 {
		return d.name + "_to"
	}
	return fmt.Sprintf("%s_d%d", d.name, k)
}

func (d dotRule) write(w io.Writer, caption string) {
	fmt.Fprintf(w, "  subgraph cluster_%s {\n    label=%s; fontsize=14; color=\"gray60\";\n", d.name, dotQuote(caption))
	fmt.Fprintf(w, "    %s_title [label=\"source\", shape=plaintext, fontcolor=\"gray30\"];\n", d.src.name)
	fmt.Fprintf(w, "    %s_title [label=\"target\", shape=plaintext, fontcolor=\"gray30\"];\n", d.dst.name)
	d.src.writeNodes(w)
	d.dst.writeNodes(w)
	srcRows, dstRows := d.src.rows(d.rows), d.dst.rows(d.rows)
	// Each title above its side's first row.
	for _, rows := range [][][]string{srcRows, dstRows} {
		for _, below := range rows[1:] {
			if len(below) > 0 {
				fmt.Fprintf(w, "    %s -> %s [style=invis];\n", rows[0][0], below[0])
				break
			}
		}
	}
	for k := 0; k <= d.rows; k++ {
		if k == d.rows/2 {
			fmt.Fprintf(w, "    %s [label=\"=>\", shape=plaintext, fontsize=28];\n", d.divider(k))
		} else {
			fmt.Fprintf(w, "    %s [label=\"\", style=invis, width=0.4];\n", d.divider(k))
		}
		fmt.Fprintf(w, "    { rank=same; edge [style=invis];")
		for _, n := range srcRows[k] {
			fmt.Fprintf(w, " %s -> %s;", n, d.divider(k))
		}
		for _, n := range dstRows[k] {
			fmt.Fprintf(w, " %s -> %s;", d.divider(k), n)
		}
		fmt.Fprintf(w, " }\n")
		if k > 0 {
			fmt.Fprintf(w, "    %s -> %s [style=invis, weight=1000];\n", d.divider(k-1), d.divider(k))
		}
	}
	d.src.writeEdges(w)
	d.dst.writeEdges(w)
	fmt.Fprintln(w, "  }")
}

// dotSide draws one side of a rule. Each side has its own copies of the
// inputs it uses, so that the two sides never share a node.
type dotSide struct {
	name string // node name prefix: "r53_src"
	r    *rules.Rule
	g    *rules.Graph
}

// Inputs and outputs are the cells of one node each, so that they keep
// their order left to right on both sides.
func (s dotSide) input(i int) string  { return fmt.Sprintf("%s_in:i%d", s.name, i) }
func (s dotSide) node(j int) string   { return fmt.Sprintf("%s_n%d", s.name, j) }
func (s dotSide) output(i int) string { return fmt.Sprintf("%s_out:o%d", s.name, i) }

func (s dotSide) ref(v rules.Value) string {
	if v.IsInput() {
		return s.input(v.Input())
	}
	return s.node(v.Node)
}

// levels places each node one row below its lowest operand; inputs and
// constants are on row 0.
func (s dotSide) levels() []int {
	levels := make([]int, len(s.g.Nodes))
	for j, n := range s.g.Nodes {
		for _, a := range n.Args {
			if a.IsInput() {
				levels[j] = max(levels[j], 1)
			} else {
				levels[j] = max(levels[j], levels[a.Node]+1)
			}
		}
	}
	return levels
}

func (s dotSide) depth() int {
	depth := 0
	for _, l := range s.levels() {
		depth = max(depth, l)
	}
	return depth
}

// rows lists the side's nodes row by row: its title, its inputs and
// constants, its operators by level, and on row last its outputs.
func (s dotSide) rows(last int) [][]string {
	rows := make([][]string, last+1)
	rows[0] = []string{s.name + "_title"}
	if s.usesInputs() {
		rows[1] = append(rows[1], s.name+"_in")
	}
	for j, l := range s.levels() {
		rows[l+1] = append(rows[l+1], s.node(j))
	}
	rows[last] = append(rows[last], s.name+"_out")
	return rows
}

func (s dotSide) usesInputs() bool { return slices.Contains(s.g.UsedInputs(), true) }

func (s dotSide) writeNodes(w io.Writer) {
	if s.usesInputs() {
		var cells []string
		for i, used := range s.g.UsedInputs() {
			if !used {
				continue
			}
			label := rules.InputName(i)
			if i < len(s.r.InputShapes) {
				label += " " + s.r.InputShapes[i].String()
			}
			cells = append(cells, portCell(fmt.Sprintf("i%d", i), label))
		}
		fmt.Fprintf(w, "    %s_in [shape=plain, label=%s];\n", s.name, cellRow(cells))
	}
	for j, n := range s.g.Nodes {
		fmt.Fprintf(w, "    %s [label=%s];\n", s.node(j), dotQuote(opLabel(n)))
	}
	var cells []string
	for i := range s.g.Outputs {
		label := "output"
		if len(s.g.Outputs) > 1 {
			label = fmt.Sprintf("output %d", i)
		}
		cells = append(cells, portCell(fmt.Sprintf("o%d", i), label))
	}
	fmt.Fprintf(w, "    %s_out [shape=plain, label=%s];\n", s.name, cellRow(cells))
}

func (s dotSide) writeEdges(w io.Writer) {
	shapes := valueShapes(s.r, s.g)
	for j, n := range s.g.Nodes {
		for a, v := range n.Args {
			fmt.Fprintf(w, "    %s -> %s%s;\n", s.ref(v), s.node(j), edgeAttrs(s.g, v, shapes, operandLabel(n.Op, a)))
		}
	}
	for i, o := range s.g.Outputs {
		fmt.Fprintf(w, "    %s -> %s%s;\n", s.ref(o), s.output(i), edgeAttrs(s.g, o, shapes, ""))
	}
}

// portCell is one cell of a cellRow, an edge's end named port.
func portCell(port, text string) string {
	return fmt.Sprintf(`<td port="%s">%s</td>`, port, html.EscapeString(text))
}

// cellRow is a Graphviz HTML-like label: one row of cells, in order.
func cellRow(cells []string) string {
	return `<<table border="0" cellborder="1" cellspacing="0" cellpadding="3" style="rounded"><tr>` + strings.Join(cells, "") + "</tr></table>>"
}

// opLabel is an operator with its named parameters, one line for the
// name and at most two parameters a line after it, so that a convolution
// stays narrow: "conv2d\nstride=1 padding=same\nactivation=relu groups=dw".
func opLabel(n rules.Node) string {
	lines := []string{n.Op.Name}
	i := 0
	for spec, v := range n.ParamValues() {
		param := spec.Name + "=" + spec.Format(v)
		if i%2 == 0 {
			lines = append(lines, param)
		} else {
			lines[len(lines)-1] += " " + param
		}
		i++
	}
	return strings.Join(lines, "\n")
}

// operandLabel names operand a of op where the order of operands matters:
// by its name in the registry ("kernel"), else by position.
func operandLabel(op *rules.Op, a int) string {
	switch {
	case op.Arity < 2 || op.Commutative:
		return ""
	case a < len(op.Operands) && op.Operands[a].Name != "":
		return op.Operands[a].Name
	case a == 0:
		return "1st"
	case a == 1:
		return "2nd"
	}
	return fmt.Sprintf("#%d", a+1)
}

// edgeAttrs labels an edge carrying v: which output of a multi-output
// operator it is (split0), the operand it feeds, and its shape.
func edgeAttrs(g *rules.Graph, v rules.Value, shapes map[rules.Value]rules.Shape, operand string) string {
	var parts []string
	if !v.IsInput() {
		if op := g.Nodes[v.Node].Op; op.Outputs > 1 && v.Out < len(op.Z3) {
			parts = append(parts, op.Z3[v.Out])
		}
	}
	if operand != "" {
		parts = append(parts, operand)
	}
	if s, ok := shapes[v]; ok && s.String() != operand {
		parts = append(parts, s.String())
	}
	if len(parts) == 0 {
		return ""
	}
	return " [label=" + dotQuote(strings.Join(parts, " ")) + "]"
}

// valueShapes infers the shape of every value of g from the rule's input
// shapes; nil when they are unknown or, unexpectedly, do not check.
func valueShapes(r *rules.Rule, g *rules.Graph) map[rules.Value]rules.Shape {
	if len(r.InputShapes) != r.NumInputs {
		return nil
	}
	shapes := map[rules.Value]rules.Shape{}
	for i, s := range r.InputShapes {
		shapes[rules.InputValue(i)] = s
	}
	for j, n := range g.Nodes {
		var in []rules.Shape
		if n.Op.IsConstant() {
			if n.ConstShape == nil {
				return nil
			}
			in = append(in, *n.ConstShape)
		}
		for _, a := range n.Args {
			in = append(in, shapes[a])
		}
		out, err := n.Op.InferShapes(n.Params, in)
		if err != nil {
			return nil
		}
		for o, s := range out {
			shapes[rules.Value{Node: j, Out: o}] = s
		}
	}
	return shapes
}

// dotQuote writes s as a Graphviz string, its line breaks centred.
func dotQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}
