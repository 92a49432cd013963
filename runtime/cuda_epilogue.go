package runtime

import (
	"fmt"
	"slices"

	"rulebook/runtime/cuda"
)

// productEpilogue is the work a product node does after its product
// through the backend's epilogue (cuBLASLt): a bias per output feature
// and an activation, taken from the nodes after it, which become views.
type productEpilogue struct {
	// bias is the value holding the MatMul's bias (the constant row of
	// the Add after it), or -1; gemmBias says the bias is the Gemm's C.
	bias     int
	gemmBias bool
	act      cuda.Activation
	absorbed []*node // the Add and activation nodes fused, in order
}

// valueReaders counts, per value, the nodes reading it and the graph
// outputs it is, and keeps a node reading it (the only one when the
// count is 1) and its producer.
type valueReaders struct {
	count    []int
	reader   map[int]*node
	producer map[int]*node
}

func (m *Model) valueReaders() valueReaders {
	r := valueReaders{count: make([]int, len(m.values)), reader: map[int]*node{}, producer: map[int]*node{}}
	for _, n := range m.nodes {
		for _, id := range n.in {
			if id >= 0 {
				r.count[id]++
				r.reader[id] = n
			}
		}
		for _, id := range n.out {
			r.producer[id] = n
		}
	}
	for _, id := range m.outputs {
		r.count[id]++
	}
	return r
}

// sole returns the node that alone reads value id, which is no graph
// output, or nil.
func (r valueReaders) sole(id int) *node {
	if r.count[id] != 1 {
		return nil
	}
	return r.reader[id]
}

// epilogueGemmer returns the backend's epilogue entry, or nil and why
// there is none.
func (s *CUDASession) epilogueGemmer() (cuda.EpilogueGemmer, string) {
	e, ok := s.dev.(cuda.EpilogueGemmer)
	switch {
	case !ok:
		return nil, "the backend has no epilogue entry"
	case e.EpilogueError() != nil:
		return nil, e.EpilogueError().Error()
	}
	return e, ""
}

// epilogueFusions finds the products (Gemm; MatMul of one matrix) whose
// bias and activation the backend's epilogue can apply: a Gemm's C of n
// elements with beta 1, or the Add of a constant row of n after a
// MatMul, then a Relu or a tanh Gelu, each the only reader of what it
// reads. Each shape is prepared here, at plan time; one the backend
// cannot fuse stays unfused, with a note. The second map gives each
// absorbed node the value whose buffer its output is.
func (s *CUDASession) epilogueFusions() (map[*node]*productEpilogue, map[*node]int) {
	lt, why := s.epilogueGemmer()
	readers := s.model.valueReaders()
	fused, absorbed := map[*node]*productEpilogue{}, map[*node]int{}
	for _, n := range s.model.nodes {
		ep, g := s.matchEpilogue(n, readers)
		if ep == nil {
			continue
		}
		if lt == nil {
			s.note("MatMul, Gemm: bias and activation run as separate kernels, not fused into the product: " + why)
			return nil, nil
		}
		if err := lt.PrepareEpilogue(g); err != nil {
			s.note(fmt.Sprintf("%s %q: bias and activation unfused: %v", n.op, n.name, err))
			continue
		}
		fused[n] = ep
		from := n.out[0]
		for _, a := range ep.absorbed {
			absorbed[a] = from
			from = a.out[0]
		}
	}
	return fused, absorbed
}

// matchEpilogue returns what of node n's readers its epilogue can take,
// and the product's shape, or nil.
func (s *CUDASession) matchEpilogue(n *node, readers valueReaders) (*productEpilogue, *cuda.EpilogueGemm) {
	if s.opt.cpuOps[n.op] || len(n.out) != 1 {
		return nil, nil
	}
	ep := &productEpilogue{bias: -1}
	var g *cuda.Gemm
	switch k := n.kernel.(type) {
	case *gemmKernel:
		if k.hasC && (k.beta != 1 || !isRowVector(s.model.values[n.in[2]].shape, k.n)) {
			return nil, nil
		}
		ep.gemmBias = k.hasC
		g = cudaRowMajorGemm(k.transA, k.transB, k.m, k.n, k.k, k.alpha, 0, 0, 0, 0, 0, 0, 0, 1)
	case *matMulKernel:
		if k.batches != 1 {
			return nil, nil
		}
		g = cudaRowMajorGemm(false, false, k.m, k.n, k.k, 1, 0, 0, 0, 0, 0, 0, 0, 1)
	default:
		return nil, nil
	}
	if g.M == 0 || g.N == 0 || g.K == 0 {
		return nil, nil
	}
	last := n.out[0]
	if _, ok := n.kernel.(*matMulKernel); ok {
		if add := readers.sole(last); add != nil && s.isBiasAdd(add, last, g.M) {
			ep.bias = other(add, last)
			ep.absorbed = append(ep.absorbed, add)
			last = add.out[0]
		}
	}
	if next := readers.sole(last); next != nil && !s.opt.cpuOps[next.op] {
		if act, ok := epilogueActivation(next.kernel); ok {
			ep.act = act
			ep.absorbed = append(ep.absorbed, next)
		}
	}
	if !ep.gemmBias && ep.bias < 0 && ep.act == cuda.ActNone {
		return nil, nil
	}
	g.Precision = s.opt.precision
	return ep, &cuda.EpilogueGemm{Gemm: *g, HasBias: ep.gemmBias || ep.bias >= 0, Act: ep.act}
}

// isBiasAdd reports whether node add adds a constant row of n elements
// to value id, keeping its shape.
func (s *CUDASession) isBiasAdd(add *node, id, n int) bool {
	if add.op != "Add" || s.opt.cpuOps["Add"] || len(add.in) != 2 || add.in[0] == add.in[1] {
		return false
	}
	bias := other(add, id)
	v := s.model.values
	return bias >= 0 && v[bias].isConst() && isRowVector(v[bias].shape, n) && slices.Equal(v[add.out[0]].shape, v[id].shape)
}

// epilogueActivation maps a Relu or a tanh Gelu to the epilogue's
// activation. The exact (erf) Gelu is not cuBLASLt's GELU.
func epilogueActivation(k kernel) (cuda.Activation, bool) {
	u, ok := k.(unaryKernel)
	switch {
	case !ok:
		return cuda.ActNone, false
	case u.op == unaryRelu:
		return cuda.ActRelu, true
	case u.op == unaryGeluTanh:
		return cuda.ActGeluTanh, true
	}
	return cuda.ActNone, false
}

// planEpilogue runs a product with its fused bias and activation: the
// backend's EpilogueGemm, on the row-major product read column-major
// (cudaRowMajorGemm), whose rows are the output features.
func (s *CUDASession) planEpilogue(ep *productEpilogue, transA, transB bool, m, nn, k int, alpha float32) *cudaNodePlan {
	lt, _ := s.epilogueGemmer()
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		g := cudaRowMajorGemm(transA, transB, m, nn, k, alpha, in[0], 0, in[1], 0, 0, out[0], 0, 1)
		g.Precision = s.opt.precision
		e := &cuda.EpilogueGemm{Gemm: *g, Act: ep.act}
		switch {
		case ep.gemmBias:
			e.HasBias, e.Bias = true, in[2]
		case ep.bias >= 0:
			e.HasBias, e.Bias = true, s.ptr[s.root[ep.bias]]
		}
		return func() error { return lt.EpilogueGemm(e) }, nil
	}}
}
