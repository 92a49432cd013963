package compare

import (
	"fmt"
	"slices"

	"rulebook/rules"
)

// Cause says why a version misses a foreign rule. Each cause has a
// Standing: the rule is false under our semantics, true but outside what
// our rules say (operand roles), or true and within them, a gap.
type Cause uint8

// Causes, in the order Explain tries them after Refuted.
const (
	// Unexplained: no cause below applies.
	Unexplained Cause = iota
	// Refuted: our verifier found a counterexample (the proof says which).
	Refuted
	// ShapeCondition: the rule holds only when its tensors' shapes meet a
	// condition, which our rules, proved without shapes, cannot carry.
	ShapeCondition
	// KernelAsActivation: a value computed from constants alone, a kernel,
	// feeds an operand that takes activations (the generator never builds
	// that: Op.Takes).
	KernelAsActivation
	// ConstantElsewhere: a constant feeds an operator other than its own
	// (Op.Feeds).
	ConstantElsewhere
	// ParamNotGenerated: an operator takes a parameter value the generator
	// does not enumerate (ParamSpec.Generate).
	ParamNotGenerated
	// TooLarge: a side has more operators than any side of the version's
	// rules.
	TooLarge
	// NeverApplies: a parallel rule whose source type-checks under none of
	// the input layouts tried (JudgeDegrees): vacuously true, and nothing a
	// rule set of well-shaped rules could say.
	NeverApplies
	numCauses
)

var causeText = [numCauses]string{
	Unexplained:        "within the generator's reach, yet missed",
	Refuted:            "false under our semantics (refuted by our verifier)",
	ShapeCondition:     "true only under a shape condition our rules cannot carry",
	KernelAsActivation: "a kernel used as an activation",
	ConstantElsewhere:  "a constant feeds an operator other than its own",
	ParamNotGenerated:  "a parameter value the generator does not enumerate",
	TooLarge:           "more operators than the version's rules have",
	NeverApplies:       "never applies (no input layouts tried make its source type-check)",
}

func (c Cause) String() string {
	if c < numCauses {
		return causeText[c]
	}
	return fmt.Sprintf("cause %d", c)
}

// Standing is what a missed rule's cause says about the rule.
type Standing uint8

const (
	// Gap: the rule is true and our rules could say it; a version that
	// misses it lacks something (at worst, a larger generator bound).
	Gap Standing = iota
	// OutsideRoles: the rule is true, but it uses a tensor as our rules
	// never do: a kernel as an activation, a constant in an operator not
	// its own (the generator's operand roles, Op.Takes and Op.Feeds, which
	// keep out identities that hold only for the pool's shapes).
	OutsideRoles
	// False: the rule is false under our semantics.
	False
)

// Standing says what the cause says about a rule missed for it.
func (c Cause) Standing() Standing {
	switch c {
	case Refuted, ShapeCondition:
		return False
	case KernelAsActivation, ConstantElsewhere, NeverApplies:
		return OutsideRoles
	}
	return Gap
}

// Causes lists every cause, in order.
func Causes() []Cause {
	out := make([]Cause, numCauses)
	for i := range out {
		out[i] = Cause(i)
	}
	return out
}

// Shortfall explains a missed rule: its cause and what in the rule shows
// it ("C_pool into ewadd").
type Shortfall struct {
	Cause  Cause
	Detail string
}

func (s Shortfall) String() string {
	if s.Detail == "" {
		return s.Cause.String()
	}
	return s.Cause.String() + ": " + s.Detail
}

// Explain gives each missed verdict its shortfall. refuted[i] says whether
// our verifier refutes rule i; ours are the version's rules.
func Explain(vs []Verdict, refuted []bool, ours []*rules.Rule) {
	largest := 0
	for _, r := range ours {
		largest = max(largest, len(r.Src.Nodes), len(r.Dst.Nodes))
	}
	for i := range vs {
		if vs[i].Relation == Missed && vs[i].Why.Cause != NeverApplies {
			vs[i].Why = explain(vs[i].Rule, refuted[i], largest)
		}
	}
}

// explain finds the first cause that applies to a missed rule. A refuted
// rule keeps what else is known about it as the detail: why it is false,
// or that the generator could not have found it anyway.
func explain(r *rules.Rule, refuted bool, largest int) Shortfall {
	why := structuralCause(r, largest)
	if !refuted {
		return why
	}
	if why.Cause == ShapeCondition {
		return Shortfall{Refuted, why.Detail}
	}
	if why.Cause != Unexplained {
		return Shortfall{Refuted, "also " + why.String()}
	}
	return Shortfall{Cause: Refuted}
}

// structuralCause looks for a cause in the rule's operators alone.
func structuralCause(r *rules.Rule, largest int) Shortfall {
	sides := []*rules.Graph{&r.Src, &r.Dst}
	checks := []func(*rules.Graph) string{groupedConcatKernels, kernelAsActivation, constantElsewhere, paramNotGenerated}
	causes := []Cause{ShapeCondition, KernelAsActivation, ConstantElsewhere, ParamNotGenerated}
	for k, check := range checks {
		for _, g := range sides {
			if detail := check(g); detail != "" {
				return Shortfall{causes[k], detail}
			}
		}
	}
	if n := max(len(r.Src.Nodes), len(r.Dst.Nodes)); n > largest {
		return Shortfall{TooLarge, fmt.Sprintf("%d operators on one side, at most %d in the version", n, largest)}
	}
	return Shortfall{Cause: Unexplained}
}

// groupedConcatKernels finds a grouped or depth-wise convolution over a
// kernel concatenated on output channels: TASO's rule that turns two
// convolutions into one of twice the groups. Our groups split the output
// channels evenly, so it holds only when both kernels have as many output
// channels (per input channel, for depth-wise ones); TASO infers the
// groups from the shapes its generator used, where they always do.
func groupedConcatKernels(g *rules.Graph) string {
	for _, n := range g.Nodes {
		if n.Op.Name != rules.NameConv2D {
			continue
		}
		groups := rules.ConvOf(n.Params).Groups
		if groups == 1 {
			continue
		}
		k := n.Args[1]
		if k.IsInput() {
			continue
		}
		if kn := g.Nodes[k.Node]; kn.Op.Name != rules.NameConcat || rules.AxisOf(kn.Params).Axis != 0 {
			continue
		}
		if groups == rules.GroupsDepthwise {
			return "both kernels need the same number of output channels per input channel (depth-wise conv2d over their concat on axis 0)"
		}
		return fmt.Sprintf("both kernels need the same number of output channels (conv2d of %d groups over their concat on axis 0; TASO infers groups from its pool's shapes, where they do)", groups)
	}
	return ""
}

// kernelAsActivation finds a value computed from constants alone (a
// weight, whatever its shape) in an operand that takes activations.
func kernelAsActivation(g *rules.Graph) string {
	fromConstants := make([]bool, len(g.Nodes))
	for j, n := range g.Nodes {
		fromConstants[j] = n.Op.IsConstant()
		all := len(n.Args) > 0
		for a, v := range n.Args {
			weight := !v.IsInput() && fromConstants[v.Node]
			all = all && weight
			if weight && !n.Op.Takes(a, rules.RoleWeight) {
				return fmt.Sprintf("%s as %s's %s", describe(g, v), n.Op.Name, operandName(n.Op, a))
			}
		}
		fromConstants[j] = fromConstants[j] || all
	}
	return ""
}

// constantElsewhere finds a constant that feeds an operator it does not
// belong to.
func constantElsewhere(g *rules.Graph) string {
	for _, n := range g.Nodes {
		for _, v := range n.Args {
			if !v.IsInput() && !g.Nodes[v.Node].Op.CanFeed(n.Op) {
				return fmt.Sprintf("%s into %s", g.Nodes[v.Node].Op.Name, n.Op.Name)
			}
		}
	}
	return ""
}

// paramNotGenerated finds a parameter value outside the generator's.
func paramNotGenerated(g *rules.Graph) string {
	for _, n := range g.Nodes {
		for spec, v := range n.Op.ParamValues(n.Params) {
			if !slices.Contains(spec.Generate, v) {
				return fmt.Sprintf("%s %s %s", n.Op.Name, spec.Name, spec.Format(v))
			}
		}
	}
	return ""
}

// describe names a value by the operator that computes it ("I_conv",
// "pool_avg of I_conv").
func describe(g *rules.Graph, v rules.Value) string {
	n := g.Nodes[v.Node]
	if len(n.Args) == 0 || n.Args[0].IsInput() {
		return n.Op.Name
	}
	return n.Op.Name + " of " + describe(g, n.Args[0])
}

func operandName(op *rules.Op, i int) string {
	if i < len(op.Operands) {
		return op.Operands[i].Name
	}
	return fmt.Sprintf("operand %d", i+1)
}

// Tally counts a comparison's verdicts: by relation, and missed rules by
// cause (see Explain).
type Tally struct {
	Relations map[Relation]int
	Causes    map[Cause]int
}

// Count tallies verdicts.
func Count(vs []Verdict) Tally {
	t := Tally{Relations: map[Relation]int{}, Causes: map[Cause]int{}}
	for _, v := range vs {
		t.Relations[v.Relation]++
		if v.Relation == Missed {
			t.Causes[v.Why.Cause]++
		}
	}
	return t
}

// Reached counts the rules the version contains or implies.
func (t Tally) Reached() int { return t.Relations[Contained] + t.Relations[Implied] }

// Missed counts the missed rules whose cause has the given standing.
func (t Tally) Missed(s Standing) int {
	n := 0
	for c, k := range t.Causes {
		if c.Standing() == s {
			n += k
		}
	}
	return n
}
