package rules

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// ParamSpec describes one integer parameter of an operator. Enumerated
// parameters (padding, activation) carry symbolic names; their integer value
// is the index of the name, which is also what the Z3 encoding uses.
type ParamSpec struct {
	Name     string
	Symbols  []string // nil for plain integers
	Min, Max int      // inclusive bounds for plain integers
	// Named gives special values of a plain integer a name (groups 0 is
	// "dw"); they are allowed besides [Min, Max].
	Named map[int]string
	// Generate lists the values the generator enumerates by default.
	Generate []int
	// Check lists the values axioms are validated at (all symbols for an
	// enumerated parameter).
	Check []int
	// Degree marks a parallel degree: a rule may hold it as the variable d
	// (DegreeVar), and the generator enumerates it at --degrees.
	Degree bool
}

// CheckValues lists the values to validate axioms at.
func (p ParamSpec) CheckValues() []int {
	if p.Symbols == nil {
		return p.Check
	}
	out := make([]int, len(p.Symbols))
	for i := range out {
		out[i] = i
	}
	return out
}

// Format renders a value as it appears in canonical text.
func (p ParamSpec) Format(v int) string {
	if p.Symbols != nil {
		return p.Symbols[v]
	}
	if name, ok := p.Named[v]; ok {
		return name
	}
	return strconv.Itoa(v)
}

// Parse reads a value written by Format.
func (p ParamSpec) Parse(text string) (int, error) {
	if p.Symbols != nil {
		for i, s := range p.Symbols {
			if s == text {
				return i, nil
			}
		}
		return 0, fmt.Errorf("parameter %s: expected one of %s, got %q", p.Name, strings.Join(p.Symbols, "|"), text)
	}
	for v, name := range p.Named {
		if name == text {
			return v, nil
		}
	}
	v, err := strconv.Atoi(text)
	if err != nil || v < p.Min || v > p.Max {
		return 0, fmt.Errorf("parameter %s: expected an integer in [%d, %d], got %q", p.Name, p.Min, p.Max, text)
	}
	return v, nil
}

// Operand describes one tensor operand of an operator.
type Operand struct {
	Name string
	// Data marks operands that take activations: the generator never feeds
	// a weight input (a conv kernel, say) there directly.
	Data bool
	// Weight marks operands that take weights: the generator never feeds an
	// activation input there directly.
	Weight bool
	// Scalar marks operands that take a scalar tensor and nothing else.
	Scalar bool
	// ScalarToo marks operands that take a scalar besides tensors (smul's
	// input, so that two scalars meet in smul(y, w) and smul's
	// associativity is found). Values computed from scalars alone go only
	// to Scalar and ScalarToo operands.
	ScalarToo bool
	// Input marks operands the generator feeds graph inputs only (TASO
	// enlarges input kernels, never computed ones).
	Input bool
	// Alone checks the operand's layout by itself (nil: no check): what no
	// other operand could make valid. The layout sweep drops the shapes it
	// refuses before pairing them with the other operands'.
	Alone func(Shape) error
}

// Op is the single definition of an operator: everything the generator,
// verifier, exporters and optimizer need to know about it.
type Op struct {
	Name  string
	Doc   string
	Arity int // tensor operands; 0 for constants
	// Operands names the tensor operands; nil means plain operands a, b.
	Operands []Operand
	Outputs  int
	Params   []ParamSpec
	// Attrs is the zero value of the struct that names Params (attrs.go);
	// nil for an operator without parameters.
	Attrs any
	// Z3 names the uninterpreted function for each output; its signature is
	// the Int parameters followed by the tensor operands.
	Z3 []string
	// Feeds names the operators a constant's value may be an operand of (the
	// identity matrix feeds matmul): the generator never builds graphs that
	// use a constant any other way.
	Feeds []string
	// Piecewise reports whether the operator, with these parameters, is
	// piecewise (relu, max): identities involving it can fail only for some
	// sign patterns of the inputs, so tests need one-signed draws. Nil means
	// polynomial.
	Piecewise func(p []int) bool
	// Commutative binary operators give the same result with their
	// operands swapped; matching may then take them in either order.
	Commutative bool
	// Shape infers output shapes or says why the operands are ill-shaped.
	// A constant (Arity 0) receives the requested shape as its only operand
	// and checks that the constant can take it.
	Shape func(p []int, in []Shape) ([]Shape, error)
	// Cost counts an application's FLOPs (cost.go); Work adds the bytes.
	Cost        CostRule
	IntKernel   func(p []int, in []*IntTensor, out []*IntTensor)
	FloatKernel func(p []int, in []*FloatTensor, out []*FloatTensor)
	// Pointwise is what the verifier's pointwise reasoning knows of the
	// operator's elements (pointwise.go); every row names it.
	Pointwise Pointwise
	// FanIn lists the factors of how many operand elements one output
	// element reads (a product's contraction, a pooling window), which
	// bounds the work of a float test. Nil, or a nil result, means one
	// element of each operand.
	FanIn func(p []int, in []Shape) []int
	// Layout says which parallel layouts the operator takes (layout.go);
	// layoutOneDevice refuses every parallel layout; constants have none.
	Layout LayoutRule
	// AlikeLayouts says the operands must be laid out alike (element-wise
	// operators, concat): a search over layouts pairs only those.
	AlikeLayouts bool
	// Set names the operator set the operator belongs to: "" for TASO's
	// default set, SetParallel for Unity's parallel operators.
	Set string
	// ONNX, TASO and FlexFlow name the operator in those formats, or say
	// it has no name there (see formats.go).
	ONNX     ONNXForm
	TASO     TASOForm
	FlexFlow FlexFlowForm
	// Keys is how the operator's parameters become TASO's keys, which
	// FlexFlow's JSON writes by name, and back (encodings.go).
	Keys KeyEncoding
	// Ranks is what the operator says of its tensors' ranks.
	Ranks RankRule
}

// DataOperand reports whether operand i takes activations only.
func (op *Op) DataOperand(i int) bool {
	return i < len(op.Operands) && op.Operands[i].Data
}

// WeightOperand reports whether operand i takes weights only.
func (op *Op) WeightOperand(i int) bool {
	return i < len(op.Operands) && op.Operands[i].Weight
}

// IsPiecewise reports whether this application is piecewise.
func (op *Op) IsPiecewise(p []int) bool { return op.Piecewise != nil && op.Piecewise(p) }

// InputOperand reports whether operand i takes graph inputs only.
func (op *Op) InputOperand(i int) bool {
	return i < len(op.Operands) && op.Operands[i].Input
}

// CanFeed reports whether this operator's value may be an operand of
// consumer (always, unless the operator is a constant that says otherwise).
func (op *Op) CanFeed(consumer *Op) bool {
	return op.Feeds == nil || slices.Contains(op.Feeds, consumer.Name)
}

// ScalarOperand reports whether operand i takes a scalar.
func (op *Op) ScalarOperand(i int) bool {
	return i < len(op.Operands) && op.Operands[i].Scalar
}

// Takes reports whether the generator may feed operand i a value of role
// r: data operands refuse weights, weight operands refuse data, scalar
// operands take scalars only, and scalars go only to scalar operands and
// to those that take a scalar too.
func (op *Op) Takes(i int, r Role) bool {
	switch {
	case op.ScalarOperand(i):
		return r == RoleNeutral
	case r == RoleNeutral:
		return i < len(op.Operands) && op.Operands[i].ScalarToo
	case r == RoleWeight:
		return !op.DataOperand(i)
	default:
		return !op.WeightOperand(i)
	}
}

// IsConstant reports whether the operator produces a constant tensor.
func (op *Op) IsConstant() bool { return op.Arity == 0 }

// InferShapes checks the parameters and operand shapes and returns the
// output shapes, with an error naming the operator.
func (op *Op) InferShapes(p []int, in []Shape) ([]Shape, error) {
	if len(p) != len(op.Params) {
		return nil, fmt.Errorf("%s: expected %d parameters, got %d", op.Name, len(op.Params), len(p))
	}
	want := op.Arity
	if op.IsConstant() {
		want = 1
	}
	if len(in) != want {
		return nil, fmt.Errorf("%s: expected %d operands, got %d", op.Name, op.Arity, len(in))
	}
	if err := op.checkLayouts(p, in); err != nil {
		return nil, &opShapeError{op: op.Name, err: err}
	}
	out, err := op.Shape(p, in)
	if err != nil {
		return nil, &opShapeError{op: op.Name, err: err}
	}
	return out, nil
}

// Eval runs one operator on concrete tensors in the given arithmetic.
func Eval[T any](op *Op, kernel func(p []int, in []*Tensor[T], out []*Tensor[T]), p []int, in []*Tensor[T], constShape Shape) ([]*Tensor[T], error) {
	return evalWith(op, kernel, p, in, constShape, nil)
}

// evalWith is Eval with its outputs from scratch (nil: allocated).
func evalWith[T any](op *Op, kernel func(p []int, in []*Tensor[T], out []*Tensor[T]), p []int, in []*Tensor[T], constShape Shape, scratch *Scratch[T]) ([]*Tensor[T], error) {
	shapes := make([]Shape, len(in))
	for i, t := range in {
		shapes[i] = t.Shape
	}
	if op.IsConstant() {
		shapes = []Shape{constShape}
	}
	outShapes, err := op.InferShapes(p, shapes)
	if err != nil {
		return nil, err
	}
	out := make([]*Tensor[T], len(outShapes))
	for i, s := range outShapes {
		out[i] = scratch.tensor(s)
	}
	kernel(p, in, out)
	return out, nil
}

// Registry is an operator set. It is built once and never changed.
type Registry struct {
	ops    []*Op
	byName map[string]*Op
	byZ3   map[string]z3Ref
}

type z3Ref struct {
	op     *Op
	output int
}

func newRegistry(ops []*Op) *Registry {
	r := &Registry{ops: ops, byName: map[string]*Op{}, byZ3: map[string]z3Ref{}}
	for _, op := range ops {
		if err := checkAttrs(op); err != nil {
			panic(err) // the rows are code: a mismatch is a programming error
		}
		r.byName[op.Name] = op
		for i, sym := range op.Z3 {
			r.byZ3[sym] = z3Ref{op, i}
		}
	}
	return r
}

// Ops lists the operators in registry order.
func (r *Registry) Ops() []*Op { return r.ops }

// Lookup finds an operator by name.
func (r *Registry) Lookup(name string) (*Op, bool) {
	op, ok := r.byName[name]
	return op, ok
}

// LookupONNX finds the operator an ONNX operator type is a form of.
func (r *Registry) LookupONNX(onnxType string) (*Op, bool) {
	for _, op := range r.ops {
		if slices.Contains(op.ONNX.Types, onnxType) {
			return op, true
		}
	}
	return nil, false
}

// LookupZ3 finds the operator and output index of a Z3 function symbol.
func (r *Registry) LookupZ3(sym string) (*Op, int, bool) {
	ref, ok := r.byZ3[sym]
	return ref.op, ref.output, ok
}

// Names lists operator names in registry order.
func (r *Registry) Names() []string {
	names := make([]string, len(r.ops))
	for i, op := range r.ops {
		names[i] = op.Name
	}
	return names
}

// Select returns the sub-registry with the named operators, in registry
// order, or an error naming every unknown operator.
func (r *Registry) Select(names []string) (*Registry, error) {
	want := map[string]bool{}
	var unknown []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if _, ok := r.byName[n]; !ok {
			unknown = append(unknown, n)
		}
		want[n] = true
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("unknown operator %s (known: %s)", strings.Join(quoteAll(unknown), ", "), strings.Join(r.Names(), ","))
	}
	if len(want) == 0 {
		return nil, fmt.Errorf("empty operator set (known: %s)", strings.Join(r.Names(), ","))
	}
	var ops []*Op
	for _, op := range r.ops {
		if want[op.Name] {
			ops = append(ops, op)
		}
	}
	return newRegistry(ops), nil
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = strconv.Quote(x)
	}
	return out
}

// WriteTable prints one line per operator of the registry: name, sets,
// operands, parameters with their domains ("|d" where the degree variable
// may stand), Z3 symbols and description, as 'rulebook ops' shows them.
func (r *Registry) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATOR\tSETS\tOPERANDS\tPARAMETERS\tZ3\tDESCRIPTION")
	for _, op := range r.Ops() {
		var params []string
		for _, p := range op.Params {
			dom := fmt.Sprintf("%d..%d", p.Min, p.Max)
			if p.Symbols != nil {
				dom = strings.Join(p.Symbols, "|")
			}
			if p.Degree {
				dom += "|d"
			}
			params = append(params, p.Name+"="+dom)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", op.Name, strings.Join(SetsOf(op), ","), op.Arity, strings.Join(params, " "), strings.Join(op.Z3, ","), op.Doc)
	}
	return tw.Flush()
}
