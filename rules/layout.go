package rules

import (
	"errors"
	"slices"
	"strings"
)

// The parallel layout of a shape (docs/parallel.md). A tensor's value is
// the pieces its devices hold. Pieces are blocks of the logical tensor, so
// a tensor is stored as its layout plus one logical tensor per partial sum:
// copies are identical by construction, and the pieces of a cut dimension
// are read off the logical tensor.

// MaxDegree bounds every parallel degree, and the replica degree.
const MaxDegree = 1024

// MaxPieces bounds a layout's pieces, the product of its degrees. It is
// above MaxDegree because a rule with the degree variable may lay a tensor
// out in d^4 pieces (partition twice, replicate, on copies), which at
// d = 8 are 4096; pieces share one logical tensor per partial sum, so many
// cost no memory.
const MaxPieces = 1 << 16

// ErrTooManyPieces is what a layout of more than MaxPieces pieces wraps: a
// bound of this implementation, not a fault of the layout.
var ErrTooManyPieces = errors.New("too many pieces")

// DegreeVar is the parameter value that stands for the degree variable d
// in a rule that holds at every degree; it is substituted before shapes
// are inferred or kernels run (see Node.WithDegree).
const DegreeVar = -1

// Degree is the number of pieces dimension i is cut into.
func (s Shape) Degree(i int) int { return orOne(s.Degrees[i]) }

// SumDegree is the number of partial sums.
func (s Shape) SumDegree() int { return orOne(s.Sum) }

// CopyDegree is the number of identical copies.
func (s Shape) CopyDegree() int { return orOne(s.Copy) }

// Pieces is the number of pieces: every device's block.
func (s Shape) Pieces() int {
	n := s.SumDegree() * s.CopyDegree()
	for i := 0; i < s.Rank; i++ {
		n *= s.Degree(i)
	}
	return n
}

// Parallel reports whether the shape has any layout beyond one device.
func (s Shape) Parallel() bool { return s.Pieces() > 1 }

// SameLayout reports whether two shapes are cut the same way.
func (s Shape) SameLayout(t Shape) bool {
	if s.SumDegree() != t.SumDegree() || s.CopyDegree() != t.CopyDegree() {
		return false
	}
	for i := 0; i < MaxRank; i++ {
		if orOne(s.Degrees[i]) != orOne(t.Degrees[i]) {
			return false
		}
	}
	return true
}

// layout is a shape's layout alone, comparable.
type layout struct {
	degrees   [MaxRank]int
	sum, copy int
}

func (s Shape) layout() layout { return layout{s.Degrees, s.Sum, s.Copy} }

// Plain returns the shape without its layout.
func (s Shape) Plain() Shape {
	s.Degrees, s.Sum, s.Copy = [MaxRank]int{}, 0, 0
	return s
}

// CheckLayout says why a layout is impossible: a degree that does not
// divide its dimension, or more pieces than MaxPieces.
func (s Shape) CheckLayout() error {
	for i := 0; i < s.Rank; i++ {
		if d := s.Degree(i); s.Dims[i]%d != 0 {
			return shapeErrorf("degree %d does not divide dimension %d of size %d", d, i, s.Dims[i])
		}
	}
	if s.Pieces() > MaxPieces {
		return &shapeError{format: "%d pieces exceed the limit of %d", args: []any{s.Pieces(), MaxPieces}, cause: ErrTooManyPieces}
	}
	return nil
}

// normalizeLayout stores degree 1 as 0, so that equal layouts compare and
// hash equal however they were built.
func (s *Shape) normalizeLayout() {
	for i := range s.Degrees {
		if s.Degrees[i] == 1 || i >= s.Rank {
			s.Degrees[i] = 0
		}
	}
	if s.Sum == 1 {
		s.Sum = 0
	}
	if s.Copy == 1 {
		s.Copy = 0
	}
}

func orOne(d int) int {
	if d == 0 {
		return 1
	}
	return d
}

// checkDegree refuses a degree below 1 or above MaxDegree. DegreeVar never
// reaches a shape rule: it is substituted first.
func checkDegree(d int) error {
	if d == DegreeVar {
		return shapeErrorf("degree variable d has no value here; substitute a degree first")
	}
	if d < 1 || d > MaxDegree {
		return shapeErrorf("degree %d: a degree must be between 1 and %d", d, MaxDegree)
	}
	return nil
}

// ---- layout rules of the operators that run piece by piece ----

// LayoutRule says which layouts an operator takes. Nil means a tensor on
// one device only.
type LayoutRule func(p []int, in []Shape) error

// layoutOneDevice takes no parallel layout: the operator's tensors live
// on one device (smul, enlarge, and rows built outside the registry).
func layoutOneDevice(_ []int, in []Shape) error {
	return shapeErrorf("takes tensors on one device only, got %s", shapeList(in))
}

// layoutAny takes every layout: the operator is linear and local (ewadd,
// concat off its axis), or it moves pieces itself.
func layoutAny([]int, []Shape) error { return nil }

// layoutNoSums takes shards and copies but not partial sums: the operator
// is not linear (relu: Σ relu(pᵢ) ≠ relu(Σ pᵢ); ewmul: Σpᵢ·Σqᵢ ≠ Σpᵢqᵢ).
func layoutNoSums(_ []int, in []Shape) error {
	for i, s := range in {
		if s.SumDegree() > 1 {
			return shapeErrorf("operand %d holds %d partial sums; reduce them first", i, s.SumDegree())
		}
	}
	return nil
}

// layoutAxisWhole refuses a cut along the operator's axis parameter
// (concat, split): the pieces would not line up with the operands.
func layoutAxisWhole(p []int, in []Shape) error {
	for i, s := range in {
		if p[0] < s.Rank && s.Degree(p[0]) > 1 {
			return shapeErrorf("operand %d is cut in %d along axis %d, the operator's own axis", i, s.Degree(p[0]), p[0])
		}
	}
	return nil
}

// checkLayouts applies the operator's layout rule when an operand is
// parallel; element-wise operands must then be laid out alike.
func (op *Op) checkLayouts(p []int, in []Shape) error {
	parallel := false
	for _, s := range in {
		if err := s.CheckLayout(); err != nil {
			return err
		}
		parallel = parallel || s.Parallel()
	}
	if !parallel || op.IsConstant() {
		return nil
	}
	if op.Layout == nil { // a row built outside the registry (the optimizer's opaque nodes)
		return layoutOneDevice(p, in)
	}
	for k, o := range op.Operands {
		if o.Alone != nil && k < len(in) {
			if err := o.Alone(in[k]); err != nil {
				return err
			}
		}
	}
	return op.Layout(p, in)
}

// whole makes an Operand.Alone check: the operand holds no partial sums
// (unless sums allows them) and none of dims is cut; why says why not.
func whole(name string, sums bool, why string, dims ...int) func(Shape) error {
	return func(s Shape) error {
		if !sums && s.SumDegree() > 1 {
			return shapeErrorf("%s %s hold partial sums; %s", name, s, why)
		}
		for _, d := range dims {
			if s.Degree(d) > 1 {
				return shapeErrorf("%s %s have dimension %d cut; %s", name, s, d, why)
			}
		}
		return nil
	}
}

func shapeList(in []Shape) string {
	out := ""
	for i, s := range in {
		if i > 0 {
			out += " and "
		}
		out += s.String()
	}
	return out
}

// ---- the parallel operators' shape rules ----

// checkDimDegree checks the dimension and degree parameters of partition
// and combine against their operand.
func checkDimDegree(x Shape, dim, d int) error {
	if err := checkDegree(d); err != nil {
		return err
	}
	if dim >= x.Rank {
		return shapeErrorf("dimension %d out of range for %s", dim, x)
	}
	return nil
}

func partitionShape(p []int, in []Shape) ([]Shape, error) {
	dim, d, x := p[0], p[1], in[0]
	if err := checkDimDegree(x, dim, d); err != nil {
		return nil, err
	}
	out := x
	out.Degrees[dim] = x.Degree(dim) * d
	if x.Dims[dim]%out.Degrees[dim] != 0 {
		return nil, shapeErrorf("degree %d does not divide dimension %d of %s into equal pieces", d, dim, x)
	}
	out.normalizeLayout()
	return []Shape{out}, out.CheckLayout()
}

func combineShape(p []int, in []Shape) ([]Shape, error) {
	dim, d, x := p[0], p[1], in[0]
	if err := checkDimDegree(x, dim, d); err != nil {
		return nil, err
	}
	if x.Degree(dim)%d != 0 {
		return nil, shapeErrorf("degree %d does not divide dimension %d's %d pieces in %s", d, dim, x.Degree(dim), x)
	}
	out := x
	out.Degrees[dim] = x.Degree(dim) / d
	out.normalizeLayout()
	return []Shape{out}, nil
}

func replicateShape(p []int, in []Shape) ([]Shape, error) {
	if err := checkDegree(p[0]); err != nil {
		return nil, err
	}
	out := in[0]
	out.Copy = out.CopyDegree() * p[0]
	out.normalizeLayout()
	return []Shape{out}, out.CheckLayout()
}

// reduceShape sums groups of d consecutive partial sums. As in
// flexflow-train, reduce consumes partial sums only and never copies, so
// it has one meaning at every layout and never changes the logical value.
func reduceShape(p []int, in []Shape) ([]Shape, error) {
	d, x := p[0], in[0]
	if err := checkDegree(d); err != nil {
		return nil, err
	}
	if x.SumDegree()%d != 0 {
		return nil, shapeErrorf("degree %d does not divide the %d partial sums of %s", d, x.SumDegree(), x)
	}
	out := x
	out.Sum = x.SumDegree() / d
	out.normalizeLayout()
	return []Shape{out}, nil
}

// productLayout lays out a (batched) matrix product x·w whose contraction
// dimension is x's last and w's row dimension (kx, kw). Unity's model: the
// two operands' pieces pair up device by device, so x's copies must cover
// w's column pieces and partial sums, and w's copies x's row pieces and
// partial sums, up to a common number of copies g that the result keeps.
// A cut contraction dimension turns into partial sums.
func productLayout(x, w Shape, out Shape, batch bool) (Shape, error) {
	kx, kw := x.Rank-1, w.Rank-2
	c := x.Degree(kx)
	if w.Degree(kw) != c {
		return Shape{}, shapeErrorf("contraction dimension cut in %d and %d pieces: %s times %s", c, w.Degree(kw), x, w)
	}
	if x.SumDegree() > 1 && w.SumDegree() > 1 {
		return Shape{}, shapeErrorf("both operands hold partial sums (%s times %s); reduce one first", x, w)
	}
	rows, cols := 1, w.Degree(w.Rank-1)
	for i := 0; i < kx; i++ {
		if batch && i == 0 {
			if x.Degree(0) != w.Degree(0) {
				return Shape{}, shapeErrorf("batch dimension cut in %d and %d pieces: %s times %s", x.Degree(0), w.Degree(0), x, w)
			}
			continue
		}
		rows *= x.Degree(i)
	}
	needX, needW := cols*w.SumDegree(), rows*x.SumDegree()
	if x.CopyDegree()%needX != 0 || w.CopyDegree()%needW != 0 || x.CopyDegree()/needX != w.CopyDegree()/needW {
		return Shape{}, shapeErrorf("pieces do not pair up: %s needs %d copies per %d column pieces and partial sums of %s, which needs %d per %d row pieces and partial sums",
			x, needX, needX, w, needW, needW)
	}
	out.Degrees = [MaxRank]int{}
	for i := 0; i < kx; i++ {
		out.Degrees[i] = x.Degrees[i]
	}
	out.Degrees[out.Rank-1] = cols
	out.Sum = c * x.SumDegree() * w.SumDegree()
	out.Copy = x.CopyDegree() / needX
	out.normalizeLayout()
	return out, out.CheckLayout()
}

// linearShape is FlexFlow's linear: x (…, in) times w (in, out), with an
// optional relu.
func linearShape(p []int, in []Shape) ([]Shape, error) {
	x, w := in[0], in[1]
	if x.Rank < 2 || x.Rank > 3 || w.Rank != 2 {
		return nil, shapeErrorf("expected an input of rank 2 or 3 and a weight matrix, got %s and %s", x, w)
	}
	if x.Dims[x.Rank-1] != w.Dims[0] {
		return nil, shapeErrorf("input features %d differ from weight rows %d: %s times %s", x.Dims[x.Rank-1], w.Dims[0], x, w)
	}
	out := x.Plain()
	out.Dims[out.Rank-1], out.Split[out.Rank-1] = w.Dims[1], w.Split[1]
	out, err := productLayout(x, w, out, false)
	if err != nil {
		return nil, err
	}
	if p[0] == ActRelu && out.SumDegree() > 1 {
		return nil, shapeErrorf("relu activation on %d partial sums (the input features are cut); reduce first", out.SumDegree())
	}
	return []Shape{out}, nil
}

func matmulLayout(x, w Shape, out Shape) (Shape, error) {
	return productLayout(x, w, out, x.Rank == 3)
}

// convLayout lays out a convolution as productLayout lays out a matrix
// product: the input's batch pieces are the rows, the kernel's output
// channels the columns, and the input channels the contraction, which a
// cut turns into partial sums. A spatial cut needs the neighbours' cells
// (a halo) unless the window is one cell at stride 1. A cut kernel window
// has no meaning: the kernel operand's Alone check refuses it before this
// runs. groups is resolved (depth-wise counted out).
func convLayout(p []int, groups int, x, w Shape, out Shape) (Shape, error) {
	oneCell := w.Dims[2] == 1 && w.Dims[3] == 1 && p[0] == 1
	for d := 2; d < 4; d++ {
		if x.Degree(d) > 1 && !oneCell {
			return Shape{}, shapeErrorf("spatial dimension %d of %s is cut under a %dx%d window at stride %d: pieces would need their neighbours' cells",
				d, x, w.Dims[2], w.Dims[3], p[0])
		}
	}
	c := x.Degree(1)
	if w.Degree(1) != c {
		return Shape{}, shapeErrorf("input channels cut in %d and %d pieces: %s and kernel %s", c, w.Degree(1), x, w)
	}
	if c > 1 && groups != 1 {
		return Shape{}, shapeErrorf("input channels cut in %d under %d groups: the kernel's channel blocks do not pair with the input's", c, groups)
	}
	if x.SumDegree() > 1 && w.SumDegree() > 1 {
		return Shape{}, shapeErrorf("both operands hold partial sums (%s and kernel %s); reduce one first", x, w)
	}
	rows, cols := x.Degree(0)*x.Degree(2)*x.Degree(3), w.Degree(0)
	needX, needW := cols*w.SumDegree(), rows*x.SumDegree()
	if x.CopyDegree()%needX != 0 || w.CopyDegree()%needW != 0 || x.CopyDegree()/needX != w.CopyDegree()/needW {
		return Shape{}, shapeErrorf("pieces do not pair up: %s needs %d copies per %d output-channel pieces and partial sums of kernel %s, which needs %d per %d batch and spatial pieces and partial sums",
			x, needX, needX, w, needW, needW)
	}
	out.Degrees = [MaxRank]int{x.Degree(0), cols, x.Degree(2), x.Degree(3)}
	out.Sum = c * x.SumDegree() * w.SumDegree()
	out.Copy = x.CopyDegree() / needX
	out.normalizeLayout()
	if p[2] == ActRelu && out.SumDegree() > 1 {
		return Shape{}, shapeErrorf("relu activation on %d partial sums; reduce first", out.SumDegree())
	}
	return out, out.CheckLayout()
}

// poolLayout takes cuts of the batch and channels and copies; partial sums
// only where the pool is linear (average, not max); a spatial cut only
// where no window straddles two pieces.
func poolLayout(linear bool) LayoutRule {
	return func(p []int, in []Shape) error {
		x := in[0]
		if !linear && x.SumDegree() > 1 {
			return shapeErrorf("operand holds %d partial sums and max is not linear; reduce them first", x.SumDegree())
		}
		for d := 2; d < 4; d++ {
			if deg := x.Degree(d); deg > 1 && !windowsInPieces(x.Dims[d], deg, p[0], p[1], p[2]) {
				return shapeErrorf("spatial dimension %d of %s is cut under a window %d at stride %d: windows would straddle pieces", d, x, p[0], p[1])
			}
		}
		return nil
	}
}

// windowsInPieces reports whether a window of k at stride k, unpadded,
// tiles each of deg pieces of an extent exactly, so that every piece pools
// on its own.
func windowsInPieces(extent, deg, k, stride, padding int) bool {
	n, padBegin, err := windowOut(extent, k, stride, padding)
	return err == nil && k == stride && padBegin == 0 && n*stride == extent && (extent/deg)%stride == 0
}

// ---- kernels ----

// moveKernel copies the pieces unchanged: partition, combine and replicate
// change only the layout.
func moveKernel[T any](_ []int, in []*Tensor[T], out []*Tensor[T]) {
	copy(out[0].Data, in[0].Data)
}

// reduceKernel adds consecutive groups of d partial sums: partial sum j
// of the result is the sum of the operand's j·d to j·d+d−1.
func reduceKernel[T any, R Ring[T]](p []int, in []*Tensor[T], out []*Tensor[T]) {
	var r R
	d, x, y := p[0], in[0], out[0]
	n := x.Shape.Size()
	for j := range y.Shape.SumDegree() {
		dst := y.Data[j*n : (j+1)*n]
		copy(dst, x.Data[j*d*n:(j*d+1)*n])
		for k := 1; k < d; k++ {
			src := x.Data[(j*d+k)*n : (j*d+k+1)*n]
			for i := range dst {
				dst[i] = r.Add(dst[i], src[i])
			}
		}
	}
}

// piece returns the logical tensor of partial sum i, as a view.
func piece[T any](t *Tensor[T], i int) *Tensor[T] {
	s := t.Shape.Plain()
	n := s.Size()
	return &Tensor[T]{Shape: s, Data: t.Data[i*n : (i+1)*n]}
}

// perSum runs a kernel on each partial sum in turn. Layout rules admit
// partial sums only where that is the operator's parallel meaning (ewadd,
// concat, transpose, split); operands then hold equally many.
func perSum[T any](kernel func(p []int, in []*Tensor[T], out []*Tensor[T])) func(p []int, in []*Tensor[T], out []*Tensor[T]) {
	return func(p []int, in []*Tensor[T], out []*Tensor[T]) {
		n := 1
		for _, t := range out {
			n = max(n, t.Shape.SumDegree())
		}
		if n == 1 {
			kernel(p, in, out)
			return
		}
		ins, outs := make([]*Tensor[T], len(in)), make([]*Tensor[T], len(out))
		for i := range n {
			for k, t := range in {
				ins[k] = piece(t, i%t.Shape.SumDegree())
			}
			for k, t := range out {
				outs[k] = piece(t, i)
			}
			kernel(p, ins, outs)
		}
	}
}

// productKernel runs a matrix product piece by piece: partial sum
// (i, l) of the result is x's partial i (or w's) restricted to contraction
// block l, times w's rows of block l.
func productKernel[T any, R Ring[T]](kernel func(p []int, in []*Tensor[T], out []*Tensor[T])) func(p []int, in []*Tensor[T], out []*Tensor[T]) {
	return contractKernel[T, R](kernel, lastAxis, nil)
}

// blockProductKernel runs a product piece by piece as productKernel does,
// x's dimension axis(rank) being the contraction. block contracts over
// block l of blocks alone, which costs a blocks-th of zeroing the others
// and contracting over all.
func blockProductKernel[T any, R Ring[T]](block func(p []int, in, out []*Tensor[T], l, blocks int), axis func(rank int) int) func(p []int, in []*Tensor[T], out []*Tensor[T]) {
	whole := func(p []int, in, out []*Tensor[T]) { block(p, in, out, 0, 1) }
	return contractKernel[T, R](whole, axis, block)
}

// lastAxis is a matrix product's contraction: the last dimension of x.
func lastAxis(rank int) int { return rank - 1 }

// channelAxis is a convolution's contraction: the input channels.
func channelAxis(int) int { return 1 }

// contractKernel runs a kernel that contracts x's dimension axis(rank)
// piece by piece: partial sum i·c + l of the result is the operands'
// partial sum i with x's contraction restricted to block l of c, by block
// where given, else by the kernel on x with the other blocks zeroed.
func contractKernel[T any, R Ring[T]](kernel func(p []int, in []*Tensor[T], out []*Tensor[T]), axis func(rank int) int, block func(p []int, in, out []*Tensor[T], l, c int)) func(p []int, in []*Tensor[T], out []*Tensor[T]) {
	return func(p []int, in []*Tensor[T], out []*Tensor[T]) {
		x, w, y := in[0], in[1], out[0]
		if !x.Shape.Parallel() && !w.Shape.Parallel() {
			kernel(p, in, out)
			return
		}
		k := axis(x.Shape.Rank)
		c := x.Shape.Degree(k)
		if y.Shape.SumDegree() == 1 {
			kernel(p, []*Tensor[T]{piece(x, 0), piece(w, 0)}, []*Tensor[T]{piece(y, 0)})
			return
		}
		var r R
		sums := max(x.Shape.SumDegree(), w.Shape.SumDegree())
		for i := range sums {
			xi, wi := piece(x, i%x.Shape.SumDegree()), piece(w, i%w.Shape.SumDegree())
			for l := range c {
				yi := piece(y, i*c+l)
				if block != nil {
					block(p, []*Tensor[T]{xi, wi}, []*Tensor[T]{yi}, l, c)
				} else {
					kernel(p, []*Tensor[T]{maskBlock(r, xi, k, l, c), wi}, []*Tensor[T]{yi})
				}
			}
		}
	}
}

// maskBlock returns x with every index of dimension axis outside block l
// of c zeroed: x_l · w equals the block product x[:, l] · w[l, :], and a
// convolution of x_l sums over channel block l alone.
func maskBlock[T any, R Ring[T]](r R, x *Tensor[T], axis, l, c int) *Tensor[T] {
	_, inner := axisBlocks(x.Shape, axis)
	k := x.Shape.Dims[axis]
	b := k / c
	m := &Tensor[T]{Shape: x.Shape, Data: make([]T, len(x.Data))}
	for i, v := range x.Data {
		if j := i / inner % k; j >= l*b && j < (l+1)*b {
			m.Data[i] = v
		} else {
			m.Data[i] = r.Zero()
		}
	}
	return m
}

// linearKernel is x·w, then relu if asked.
func linearKernel[T any, R Ring[T]](p []int, in []*Tensor[T], out []*Tensor[T]) {
	linearBlock[T, R](p, in, out, 0, 1)
}

// linearBlock is x·w over block l of blocks of the contraction (all of it
// at 0 of 1), then relu if asked. w's columns are copied contiguous once,
// so that each output is one dot product, reduced once.
func linearBlock[T any, R Ring[T]](p []int, in, out []*Tensor[T], l, blocks int) {
	var r R
	x, w, y := in[0], in[1], out[0]
	k, n := w.Shape.Dims[0], w.Shape.Dims[1]
	lo, hi := l*k/blocks, (l+1)*k/blocks
	m := hi - lo
	cols := make([]T, n*m)
	for t := lo; t < hi; t++ {
		for j := 0; j < n; j++ {
			cols[j*m+t-lo] = w.Data[t*n+j]
		}
	}
	rows := x.Shape.Size() / k
	for i := 0; i < rows; i++ {
		row := x.Data[i*k+lo : i*k+hi]
		for j := 0; j < n; j++ {
			acc := r.Dot(r.Zero(), row, cols[j*m:(j+1)*m])
			if p[0] == ActRelu {
				acc = r.Relu(acc)
			}
			y.Data[i*n+j] = acc
		}
	}
}

// parallelOps are Unity's parallelization operators and FlexFlow's linear.
func parallelOps() []*Op {
	dim := func() ParamSpec {
		return ParamSpec{Name: "dim", Min: 0, Max: MaxRank - 1, Generate: []int{0, 1, 2}, Check: []int{0, 1, 2}}
	}
	degree := func() ParamSpec {
		return ParamSpec{Name: "degree", Min: 1, Max: MaxDegree, Named: map[int]string{DegreeVar: "d"},
			Generate: []int{2}, Check: []int{1, 2, 3, 4}, Degree: true}
	}
	ffParallel := []string{"PM_PARALLEL_DIM", "PM_PARALLEL_DEGREE"}
	return []*Op{
		{Name: NamePartition, Attrs: CutAttrs{}, Doc: "cut a dimension into degree more pieces (Unity's partition); the logical value is unchanged", Arity: 1, Outputs: 1, Z3: []string{"partition"}, Pointwise: PointwiseOpaque,
			Set: SetParallel, Params: []ParamSpec{dim(), degree()}, Layout: layoutAny,
			Shape: partitionShape, Cost: CostPerOutput, IntKernel: moveKernel[uint32], FloatKernel: moveKernel[float64],
			ONNX: ONNXForm{None: true}, TASO: TASOForm{None: true},
			FlexFlow: FlexFlowForm{Type: "OP_PARTITION", Params: ffParallel, Required: ffParallel, Operands: []int{1}},
			Keys:     cutKeys(), Ranks: RankRule{Alike: []int{0}}},
		{Name: NameCombine, Attrs: CutAttrs{}, Doc: "join groups of degree pieces of a dimension (Unity's combine); the inverse of partition", Arity: 1, Outputs: 1, Z3: []string{"combine"}, Pointwise: PointwiseOpaque,
			Set: SetParallel, Params: []ParamSpec{dim(), degree()}, Layout: layoutAny,
			Shape: combineShape, Cost: CostPerOutput, IntKernel: moveKernel[uint32], FloatKernel: moveKernel[float64],
			ONNX: ONNXForm{None: true}, TASO: TASOForm{None: true},
			FlexFlow: FlexFlowForm{Type: "OP_COMBINE", Params: ffParallel, Required: ffParallel, Operands: []int{1}},
			Keys:     cutKeys(), Ranks: RankRule{Alike: []int{0}}},
		{Name: NameReplicate, Attrs: DegreeAttrs{}, Doc: "make degree identical copies of every piece (Unity's replicate)", Arity: 1, Outputs: 1, Z3: []string{"replicate"}, Pointwise: PointwiseOpaque,
			Set: SetParallel, Params: []ParamSpec{degree()}, Layout: layoutAny,
			Shape: replicateShape, Cost: CostPerOutput, IntKernel: moveKernel[uint32], FloatKernel: moveKernel[float64],
			ONNX: ONNXForm{None: true}, TASO: TASOForm{None: true},
			// FlexFlow's replicate names a dimension, which our single replica
			// dimension does not need; the importer reads and drops it.
			FlexFlow: FlexFlowForm{Type: "OP_REPLICATE", Params: ffParallel, Required: ffParallel[1:], Operands: []int{1}},
			Keys:     replicaKeys(), Ranks: RankRule{Alike: []int{0}}},
		{Name: NameReduce, Attrs: DegreeAttrs{}, Doc: "add groups of degree consecutive partial sums (Unity's reduce; as in flexflow-train it takes partial sums only)", Arity: 1, Outputs: 1, Z3: []string{"reduce"}, Pointwise: PointwiseOpaque,
			Set: SetParallel, Params: []ParamSpec{degree()}, Layout: layoutAny,
			Shape: reduceShape, Cost: CostPerOutput, IntKernel: reduceKernel[uint32, Mod], FloatKernel: reduceKernel[float64, Real],
			ONNX: ONNXForm{None: true}, TASO: TASOForm{None: true},
			FlexFlow: FlexFlowForm{Type: "OP_REDUCE", Params: ffParallel, Required: ffParallel[1:], Operands: []int{1}},
			Keys:     replicaKeys(), Ranks: RankRule{Alike: []int{0}}},
		{Name: NameLinear, Attrs: ActivationAttrs{}, Doc: "FlexFlow's linear: input (…, in) times weight (in, out), then the activation", Arity: 2, Outputs: 1, Z3: []string{"linear"}, Pointwise: PointwiseOpaque,
			Set:       SetParallel,
			Operands:  []Operand{{Name: "input", Data: true}, {Name: "weight", Weight: true}},
			Params:    []ParamSpec{{Name: "activation", Symbols: activationSymbols, Generate: []int{ActNone, ActRelu}}},
			Piecewise: func(p []int) bool { return p[0] == ActRelu },
			Layout:    layoutAny,
			Shape:     linearShape, Cost: CostProduct, IntKernel: blockProductKernel[uint32, Mod](linearBlock[uint32, Mod], lastAxis), FloatKernel: blockProductKernel[float64, Real](linearBlock[float64, Real], lastAxis),
			ONNX: ONNXForm{None: true}, TASO: TASOForm{None: true},
			FlexFlow: FlexFlowForm{Type: "OP_LINEAR", Params: []string{"PM_ACTI"}, Operands: []int{2}},
			Keys:     linearKeys(), Ranks: RankRule{Alike: []int{0}, Operands: map[int]int{1: 2}}},
		{Name: NameEmbedding, Doc: "look up rows of a table: indices (n) into a table (rows, columns) give (n, columns); an index is taken modulo the rows", Arity: 2, Outputs: 1, Z3: []string{"embedding"}, Pointwise: PointwiseOpaque,
			Set:      SetParallel,
			Operands: []Operand{{Name: "indices", Data: true, Alone: whole("indices", false, "an index is looked up, not added")}, {Name: "table", Weight: true}},
			Layout:   layoutAny, Shape: embeddingShape, Cost: CostPerOutput,
			IntKernel: embeddingKernel(modIndex), FloatKernel: embeddingKernel(realIndex),
			// ONNX's Gather on a weight is an embedding; the optimizer does
			// not rewrite lookups, so no form is read or written yet.
			ONNX: ONNXForm{None: true}, TASO: TASOForm{None: true}, FlexFlow: FlexFlowForm{None: true},
			Keys: plainKeys(), Ranks: RankRule{Result: 2, Operands: map[int]int{0: 1, 1: 2}}},
		{Name: NameAttnSoftmax, Doc: "attention's weights: queries (B, H, S, E) and keys (B, H, T, E) give (B, H, S, T), each row the softmax of the query's scaled dot products with the keys", Arity: 2, Outputs: 1, Z3: []string{"attn_softmax"}, Pointwise: PointwiseOpaque,
			Set: SetParallel,
			Operands: []Operand{{Name: "queries", Data: true, Alone: whole("queries", false, "the scores feed a softmax", 3)},
				{Name: "keys", Data: true, Alone: whole("keys", false, "each query's softmax needs every key whole", 2, 3)}},
			// The exact kernel stands in for the softmax (attention.go):
			// every check draws floats too.
			Piecewise: always,
			Layout:    layoutAny, Shape: attnSoftmaxShape, Cost: CostPerOutput,
			IntKernel: attnSoftmaxKernel[uint32, Mod](squaresWeights), FloatKernel: attnSoftmaxKernel[float64, Real](softmaxWeights),
			ONNX: ONNXForm{None: true}, TASO: TASOForm{None: true}, FlexFlow: FlexFlowForm{None: true},
			Keys: plainKeys(), Ranks: RankRule{Result: 4, Operands: map[int]int{0: 4, 1: 4}}},
		{Name: NameAttnMix, Doc: "attention's output: weights (B, H, S, T) and values (B, H, T, F) give (B, H, S, F), a product batched over B and H", Arity: 2, Outputs: 1, Z3: []string{"attn_mix"}, Pointwise: PointwiseOpaque,
			Set: SetParallel,
			// No operand holds partial sums, and the keys, the contraction,
			// are not cut: a cut contraction gives partial sums, whose order
			// differs between (w·u)·v and w·(u·v), and the mix is
			// associative only where none arise.
			Operands: []Operand{{Name: "weights", Data: true, Alone: whole("weights", false, "the key columns are the mix's contraction", 3)},
				{Name: "values", Data: true, Alone: whole("values", false, "the key rows are the mix's contraction", 2)}},
			Layout: layoutAny, Shape: attnMixShape, Cost: CostPerOutput,
			IntKernel: attnMixKernel[uint32, Mod], FloatKernel: attnMixKernel[float64, Real],
			ONNX: ONNXForm{None: true}, TASO: TASOForm{None: true}, FlexFlow: FlexFlowForm{None: true},
			Keys: plainKeys(), Ranks: RankRule{Result: 4, Operands: map[int]int{0: 4, 1: 4}}},
		{Name: NameBatchNorm, Doc: "batch normalisation in training, NCHW, without its affine: each channel centred and scaled by its mean and variance over the batch and image", Arity: 1, Outputs: 1, Z3: []string{"batchnorm"}, Pointwise: PointwiseOpaque,
			Set: SetParallel,
			Operands: []Operand{{Name: "input", Data: true,
				Alone: whole("input", false, "each channel is normalised by statistics over its whole batch and image", 0, 2, 3)}},
			// The exact kernel stands in for the square root (batchnorm.go):
			// every check draws floats too.
			Piecewise: always,
			Layout:    layoutAny, Shape: batchNormShape, Cost: CostPerOutput,
			IntKernel: batchNormExact, FloatKernel: batchNormFloat,
			// ONNX's BatchNormalization in training mode and TASO's and
			// FlexFlow's batchnorm take a scale and a shift (and TASO's the
			// running statistics), which this one leaves to ewmul and ewadd.
			ONNX: ONNXForm{None: true}, TASO: TASOForm{None: true}, FlexFlow: FlexFlowForm{None: true},
			Keys: plainKeys(), Ranks: RankRule{Result: 4, Operands: map[int]int{0: 4}}},
	}
}

// SelectOps reads an --ops value: empty for the default set, "parallel" for
// the parallel set, or comma-separated operator names of either set (a set
// name among them stands for its operators).
func SelectOps(spec string) (*Registry, error) {
	if strings.TrimSpace(spec) == "" {
		return Default(), nil
	}
	var names []string
	for _, n := range strings.Split(spec, ",") {
		switch strings.TrimSpace(n) {
		case SetParallel:
			names = append(names, Parallel().Names()...)
		case "taso", "default":
			names = append(names, Default().Names()...)
		default:
			names = append(names, n)
		}
	}
	return All().Select(names)
}

// EachDegree calls f with the value of every degree parameter of the
// graph (DegreeVar for the variable d).
func (g *Graph) EachDegree(f func(d int)) {
	for _, n := range g.Nodes {
		for i, spec := range n.Op.Params {
			if spec.Degree {
				f(n.Params[i])
			}
		}
	}
}

// EachDegree calls f with every degree parameter of both sides.
func (r *Rule) EachDegree(f func(d int)) {
	r.Src.EachDegree(f)
	r.Dst.EachDegree(f)
}

// UsesParallelOps reports whether the rule applies an operator of the
// parallel set that the default set lacks.
func (r *Rule) UsesParallelOps() bool {
	for _, g := range []*Graph{&r.Src, &r.Dst} {
		for _, n := range g.Nodes {
			if n.Op.Set == SetParallel {
				return true
			}
		}
	}
	return false
}

// HasDegreeVar reports whether the graph uses the degree variable d.
func (g *Graph) HasDegreeVar() bool {
	found := false
	g.EachDegree(func(d int) { found = found || d == DegreeVar })
	return found
}

// WithDegree returns a copy of the graph with d in place of the degree
// variable.
func (g *Graph) WithDegree(d int) *Graph { return g.replaceDegree(DegreeVar, d) }

// replaceDegree returns a copy of the graph with every degree parameter
// equal to from set to to.
func (g *Graph) replaceDegree(from, to int) *Graph {
	out := *g
	out.Nodes = make([]Node, len(g.Nodes))
	for k, n := range g.Nodes {
		n.Params = append([]int(nil), n.Params...)
		for i, spec := range n.Op.Params {
			if spec.Degree && n.Params[i] == from {
				n.Params[i] = to
			}
		}
		out.Nodes[k] = n
	}
	return &out
}

// HasDegreeVar reports whether the rule holds at every degree d.
func (r *Rule) HasDegreeVar() bool { return r.Src.HasDegreeVar() || r.Dst.HasDegreeVar() }

// WithDegree returns the rule at degree d.
func (r *Rule) WithDegree(d int) *Rule {
	out := *r
	out.Src, out.Dst = *r.Src.WithDegree(d), *r.Dst.WithDegree(d)
	return &out
}

// SetsOf names the operator sets an operator belongs to.
func SetsOf(op *Op) []string {
	if op.Set == SetParallel {
		return []string{SetParallel}
	}
	if slices.Contains(parallelCompanions, op.Name) {
		return []string{"default", SetParallel}
	}
	return []string{"default"}
}
