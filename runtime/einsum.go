package runtime

import (
	"fmt"
	"slices"
	"strings"
)

// einsumPlan is an Einsum of one or two operands as a batched matrix
// product: A is permuted to [batch, free of A, contracted], B to [batch,
// contracted, free of B], and the [batch, free A, free B] product to the
// output's label order. One operand is a product with nothing: its
// contracted labels are summed.
type einsumPlan struct {
	permA, permB, permOut []int // nil when the layout is already right
	shapeA, shapeB        []int // the operands' shapes
	canonical             []int // the product's shape before permOut
	batch, m, n, k        int
	unary                 bool
}

// prepareEinsum reads Einsum's equation (spaces allowed, no ellipsis, no
// label repeated within an operand) and plans it; maxvit's attention is
// "BGHID,BGHJD->BGHIJ" and "BGHIJ,BGHJD->BGHID".
func prepareEinsum(c *nodeContext) (prepared, error) {
	eq := strings.ReplaceAll(c.attrs.str("equation", ""), " ", "")
	terms, out, err := parseEinsum(eq, len(c.inputs))
	if err != nil {
		return prepared{}, fmt.Errorf("equation %q: %w", eq, err)
	}
	sizes := map[rune]int{}
	for i, term := range terms {
		shape := c.shape(i)
		if len(shape) != len(term) {
			return prepared{}, fmt.Errorf("equation %q: operand %d has rank %d, its term %q %d labels", eq, i, len(shape), term, len(term))
		}
		for j, l := range term {
			if s, ok := sizes[l]; ok && s != shape[j] {
				return prepared{}, fmt.Errorf("equation %q: label %c is %d in one operand and %d in another (no broadcasting)", eq, l, s, shape[j])
			}
			sizes[l] = shape[j]
		}
	}
	plan, err := planEinsum(terms, out, sizes)
	if err != nil {
		return prepared{}, fmt.Errorf("equation %q: %w", eq, err)
	}
	plan.shapeA = c.shape(0)
	if !plan.unary {
		plan.shapeB = c.shape(1)
	}
	outShape := make([]int, len(out))
	for i, l := range out {
		outShape[i] = sizes[l]
	}
	return prepared{kernel: plan, outputs: [][]int{outShape}, params: "equation=" + eq}, nil
}

// parseEinsum splits an equation into its operands' labels and the
// output's; without "->", the output is every label used once, sorted.
func parseEinsum(eq string, operands int) (terms []string, out string, err error) {
	if strings.Contains(eq, ".") {
		return nil, "", fmt.Errorf("ellipsis is not supported")
	}
	in, out, explicit := strings.Cut(eq, "->")
	terms = strings.Split(in, ",")
	if len(terms) != operands || operands > 2 {
		return nil, "", fmt.Errorf("%d terms for %d operands (one or two are supported)", len(terms), operands)
	}
	count := map[rune]int{}
	for _, term := range terms {
		for _, l := range term {
			if strings.Count(term, string(l)) > 1 {
				return nil, "", fmt.Errorf("label %c repeats within %q (diagonals are not supported)", l, term)
			}
			count[l]++
		}
	}
	if !explicit {
		var once []rune
		for l, n := range count {
			if n == 1 {
				once = append(once, l)
			}
		}
		slices.Sort(once)
		out = string(once)
	}
	for _, l := range out {
		if count[l] == 0 || strings.Count(out, string(l)) > 1 {
			return nil, "", fmt.Errorf("output label %c is in no operand or repeats", l)
		}
	}
	return terms, out, nil
}

// planEinsum sorts the labels into batch, free and contracted ones.
func planEinsum(terms []string, out string, sizes map[rune]int) (*einsumPlan, error) {
	a, b := terms[0], ""
	if len(terms) == 2 {
		b = terms[1]
	}
	in := func(s string, l rune) bool { return strings.ContainsRune(s, l) }
	var batch, freeA, freeB, contracted []rune
	for _, l := range out {
		switch {
		case in(a, l) && in(b, l):
			batch = append(batch, l)
		case in(a, l):
			freeA = append(freeA, l)
		default:
			freeB = append(freeB, l)
		}
	}
	for _, l := range a {
		if !in(out, l) {
			contracted = append(contracted, l)
		}
	}
	for _, l := range b {
		if !in(out, l) && !in(a, l) {
			return nil, fmt.Errorf("label %c is summed in the second operand only", l)
		}
	}
	if b == "" {
		freeA = append(batch, freeA...) // one operand: every kept label is A's
		batch = nil
	} else {
		for _, l := range contracted {
			if !in(b, l) {
				return nil, fmt.Errorf("label %c is summed in the first operand only", l)
			}
		}
	}
	size := func(ls []rune) int {
		n := 1
		for _, l := range ls {
			n *= sizes[l]
		}
		return n
	}
	p := &einsumPlan{batch: size(batch), m: size(freeA), n: size(freeB), k: size(contracted), unary: b == ""}
	p.permA = permutation(a, slices.Concat(batch, freeA, contracted))
	if b != "" {
		p.permB = permutation(b, slices.Concat(batch, contracted, freeB))
	}
	canonical := slices.Concat(batch, freeA, freeB)
	p.permOut = permutation(string(canonical), []rune(out))
	for _, l := range canonical {
		p.canonical = append(p.canonical, sizes[l])
	}
	return p, nil
}

// permutation is the perm that reorders labels from into order, nil when
// it is the identity.
func permutation(from string, order []rune) []int {
	labels := []rune(from)
	perm := make([]int, len(order))
	identity := true
	for i, l := range order {
		perm[i] = slices.Index(labels, l)
		identity = identity && perm[i] == i
	}
	if identity {
		return nil
	}
	return perm
}

// scratchSize holds the permuted operands and the unpermuted product.
func (p *einsumPlan) scratchSize(int) int {
	size := 0
	if p.permA != nil {
		size += p.batch * p.m * p.k
	}
	if p.permB != nil {
		size += p.batch * p.k * p.n
	}
	if p.permOut != nil {
		size += p.batch * p.m * p.n
	}
	return size
}

func (p *einsumPlan) bind(in, out []*Tensor, e *env) func() {
	scratch := e.scratch
	take := func(n int) []float32 {
		s := scratch[:n:n]
		scratch = scratch[n:]
		return s
	}
	var steps []func()
	a := in[0]
	if p.permA != nil {
		a = &Tensor{Data: take(p.batch * p.m * p.k)}
		steps = append(steps, newTransposeKernel(p.shapeA, p.permA).bind(in[:1], []*Tensor{a}, e))
	}
	var b *Tensor
	if !p.unary {
		b = in[1]
		if p.permB != nil {
			b = &Tensor{Data: take(p.batch * p.k * p.n)}
			steps = append(steps, newTransposeKernel(p.shapeB, p.permB).bind(in[1:2], []*Tensor{b}, e))
		}
	}
	c := out[0]
	if p.permOut != nil {
		c = &Tensor{Shape: p.canonical, Data: take(p.batch * p.m * p.n)}
	}
	steps = append(steps, p.product(a, b, c, e))
	if p.permOut != nil {
		steps = append(steps, newTransposeKernel(p.canonical, p.permOut).bind([]*Tensor{c}, out, e))
	}
	return func() {
		for _, s := range steps {
			s()
		}
	}
}

// product multiplies A by B batch by batch, one batch per worker when
// there are enough, or sums A's contracted labels when there is no B.
func (p *einsumPlan) product(a, b, c *Tensor, e *env) func() {
	if p.unary {
		return func() {
			for r := range p.m {
				var sum float32
				for _, v := range a.Data[r*p.k : (r+1)*p.k] {
					sum += v
				}
				c.Data[r] = sum
			}
		}
	}
	aSize, bSize, cSize := p.m*p.k, p.k*p.n, p.m*p.n
	set := func(g *gemmCall, i int) {
		g.set(false, false, p.m, p.n, p.k, 1, a.Data[i*aSize:(i+1)*aSize], b.Data[i*bSize:(i+1)*bSize], 0, c.Data[i*cSize:(i+1)*cSize])
	}
	if p.batch >= e.workers.threads && e.workers.threads > 1 {
		return func() {
			e.workers.parallelFor(p.batch, 1, func(lo, hi int) {
				var g gemmCall
				for i := lo; i < hi; i++ {
					set(&g, i)
					g.run(nil)
				}
			})
		}
	}
	g := newGemmCall()
	return func() {
		for i := range p.batch {
			set(g, i)
			g.run(e.workers)
		}
	}
}
