package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// CondKind is what a rule's condition constrains.
type CondKind int

// The kinds of condition. There is one so far; a new kind needs its
// keyword here, a check in Condition.Holds, a predicate in the axioms'
// declarations and an assertion in the verifier.
const (
	// CondKernel: the input is a rank-4 tensor (an OIHW kernel) whose
	// last two extents, height and width, are the condition's Dims. A
	// 1×1 kernel makes a convolution a per-pixel linear map, which
	// commutes with spatial operators such as average pooling.
	CondKernel CondKind = iota + 1
)

// condKeywords spell the kinds in rule text, in the axioms and in Z3,
// where each is a predicate over a tensor and Arity integers.
var condKeywords = map[CondKind]string{CondKernel: "kernel"}

// CondKinds lists the kinds of condition, in order.
func CondKinds() []CondKind { return []CondKind{CondKernel} }

// Keyword spells the kind in rule text and names its predicate in the
// axioms and in Z3.
func (k CondKind) Keyword() string { return condKeywords[k] }

// Arity is the number of integers the kind's predicate takes after its
// tensor.
func (k CondKind) Arity() int { return 2 }

// CondKindOf is the kind a keyword spells.
func CondKindOf(keyword string) (CondKind, bool) {
	for _, k := range CondKinds() {
		if k.Keyword() == keyword {
			return k, true
		}
	}
	return 0, false
}

// Condition is a precondition of a rule on the shape of one input: the
// rule's two sides agree wherever every one of its conditions holds, and
// may differ elsewhere (a partially equivalent transformation, in PET's
// terms). It is written after the target, "SRC => DST if (kernel ?b 1 1)".
type Condition struct {
	Kind  CondKind
	Input int    // the input it constrains, in the rule's numbering
	Dims  [2]int // CondKernel: the kernel's height and width
}

// Holds reports whether an input of shape s meets the condition.
func (c Condition) Holds(s Shape) bool {
	switch c.Kind {
	case CondKernel:
		return s.Rank == 4 && s.Dims[2] == c.Dims[0] && s.Dims[3] == c.Dims[1]
	}
	return false
}

// format writes the condition with the input named name.
func (c Condition) format(name string) string {
	return fmt.Sprintf("(%s %s %d %d)", condKeywords[c.Kind], name, c.Dims[0], c.Dims[1])
}

// compareConditions orders conditions as canonical text lists them.
func compareConditions(a, b Condition) int {
	return cmp.Or(cmp.Compare(a.Input, b.Input), cmp.Compare(a.Kind, b.Kind),
		cmp.Compare(a.Dims[0], b.Dims[0]), cmp.Compare(a.Dims[1], b.Dims[1]))
}

// formatConditions writes conds, inputs renamed by rename (old input to
// canonical index), sorted and without repeats; "" for none.
func formatConditions(conds []Condition, rename func(int) int) string {
	mapped := make([]Condition, len(conds))
	for i, c := range conds {
		c.Input = rename(c.Input)
		mapped[i] = c
	}
	slices.SortFunc(mapped, compareConditions)
	mapped = slices.Compact(mapped)
	parts := make([]string, len(mapped))
	for i, c := range mapped {
		parts[i] = c.format(inputName(c.Input))
	}
	return strings.Join(parts, " ")
}

// Conditional reports whether the rule holds only under conditions.
func (r *Rule) Conditional() bool { return len(r.Conds) > 0 }

// InputHolds reports whether input i of shape s meets the rule's
// conditions on it.
func (r *Rule) InputHolds(i int, s Shape) bool {
	for _, c := range r.Conds {
		if c.Input == i && !c.Holds(s) {
			return false
		}
	}
	return true
}

// Holds reports whether inputs of these shapes meet every condition of the
// rule; a rule without conditions holds at any shapes.
func (r *Rule) Holds(shapes []Shape) bool {
	for _, c := range r.Conds {
		if c.Input >= len(shapes) || !c.Holds(shapes[c.Input]) {
			return false
		}
	}
	return true
}

// condition reads "kernel ?x H W)", what follows a condition's "(".
func (p *parser) condition() (Condition, error) {
	head := p.next()
	kind, ok := CondKindOf(head.text)
	if !ok {
		return Condition{}, p.fail(head, "expected a condition (kernel)")
	}
	c := Condition{Kind: kind}
	in := p.next()
	idx, ok := p.inputs[in.text]
	if !ok {
		return c, p.fail(in, "expected an input of the rule")
	}
	c.Input = idx
	for i := range c.Dims {
		t := p.next()
		v, err := positive(t.text)
		if err != nil {
			return c, &SyntaxError{Line: t.line, Col: t.col, Msg: fmt.Sprintf("%s: %v", head.text, err)}
		}
		c.Dims[i] = v
	}
	return c, p.expect(")")
}

// conditions reads "if" and one or more conditions, if the text goes on.
func (p *parser) conditions() ([]Condition, error) {
	if p.peek().text != "if" {
		return nil, nil
	}
	p.next()
	var out []Condition
	for p.peek().text == "(" {
		p.next()
		c, err := p.condition()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, p.fail(p.peek(), "expected a condition after \"if\"")
	}
	return out, nil
}
