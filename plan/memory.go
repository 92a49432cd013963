package plan

import (
	"strconv"
	"strings"

	"rulebook/training"
)

// memory is the fullest device's memory: weights, gradients and Adam's two
// moments for its stage's share of the parameters (ZeRO shards them over
// the data-parallel group), and the activations its stage saves for
// backward, for as many micro-batches as 1F1B keeps in flight (pp −
// stage, the first stage holding most). Weights, gradients and Adam's
// moments are fp32 in every precision; activations are elem bytes an
// element (training counts 4). In 16 bits (elem 2) autocast also keeps
// a 16-bit copy of every weight a product reads, for the whole step: the
// backward's input gradient reads it (castCopies).
func memory(g *training.Graph, s Strategy, r *Result, elem float64) Memory {
	per := make([]Memory, s.PP)
	unit := make([]float64, s.PP) // the largest block's weights: what ZeRO-3 gathers at once
	blockWeights := map[int]float64{}
	for i, op := range g.Ops {
		w := op.ParamBytes * r.weightShare(i, s.TP)
		per[r.Stage[i]].Weights += w
		per[r.Stage[i]].CastCopies += castCopy(op.Product != nil, w, elem)
		blockWeights[r.block[i]] += w
		if r.block[i] < 0 {
			unit[r.Stage[i]] = max(unit[r.Stage[i]], w)
		}
	}
	for i := range g.Ops {
		if b := r.block[i]; b >= 0 {
			unit[r.Stage[i]] = max(unit[r.Stage[i]], blockWeights[b])
		}
	}
	micro := 1 / (float64(s.DP) * float64(s.Microbatches))
	kept, peak := saved(g, s, r)
	var worst Memory
	for st, m := range per {
		inFlight := float64(min(s.PP-st, s.Microbatches))
		m.Activations = (kept[st]*inFlight + peak[st]) * micro * elem / 4
		m.Gradients, m.Optimizer = m.Weights, 2*m.Weights
		if dp := float64(s.DP); s.DP > 1 {
			if s.ZeRO >= 1 {
				m.Optimizer /= dp
			}
			if s.ZeRO >= 2 {
				m.Gradients /= dp
			}
			if s.ZeRO >= 3 {
				// the copies are made of the gathered weights: a share
				// of each, and the block gathered at once whole
				m.CastCopies = m.CastCopies/dp + castCopy(true, unit[st], elem)
				m.Weights = m.Weights/dp + unit[st]
			}
		}
		if m.Total() > worst.Total() {
			worst = m
		}
	}
	return worst
}

// castCopy is the bytes of autocast's 16-bit copy of w bytes of fp32
// weights, when activations are elem bytes and a product or convolution
// reads them: those run in 16 bits and read the copy; nothing else is
// cast (autocast leaves embeddings and norms in fp32).
func castCopy(product bool, w, elem float64) float64 {
	if elem >= 4 || !product {
		return 0
	}
	return w * elem / 4
}

// saved is what each stage keeps for backward per micro-batch (of the
// whole graph's batch), each storage once per stage: kept for every
// micro-batch in flight, and a peak needed for one at a time. With
// recomputation a block keeps only its inputs, and its own saved tensors
// come back for one block at a time during backward: the peak is the
// largest block's.
func saved(g *training.Graph, s Strategy, r *Result) (kept, peak []float64) {
	kept, peak = make([]float64, s.PP), make([]float64, s.PP)
	seen := map[string]bool{}
	inBlock := map[int]float64{}
	for i, op := range g.Ops {
		st, b := r.Stage[i], r.block[i]
		recomputed := s.Recompute && b >= 0
		for _, sv := range op.Saved {
			bytes := sv.Bytes * savedCut(g, r, i, sv.Value, s.TP)
			if sv.Value != "" {
				k := strconv.Itoa(st) + " " + g.Storage(sv.Value)
				if recomputed {
					k += " block " + strconv.Itoa(b)
				}
				if seen[k] {
					continue
				}
				seen[k] = true
			}
			if recomputed {
				inBlock[b] += bytes
			} else {
				kept[st] += bytes
			}
		}
		if !recomputed {
			continue
		}
		for _, v := range op.Inputs {
			p, made := g.Producer(v)
			outside := (made && r.block[p] != b) || (!made && g.IsInput(v) && g.HasBatch(v))
			k := strconv.Itoa(st) + " input " + g.Storage(v)
			if outside && !seen[k] {
				seen[k] = true
				kept[st] += g.ValueBytes(v) * savedCut(g, r, i, v, s.TP)
			}
		}
	}
	for i := range g.Ops {
		if b := r.block[i]; b >= 0 && s.Recompute {
			peak[r.Stage[i]] = max(peak[r.Stage[i]], inBlock[b])
		}
	}
	return kept, peak
}

// savedCut is the share of saved value v (or, for "", of op i's own
// saved tensor) one device of the tensor-parallel group keeps: a value
// made on feature slices is kept in slices, unless op i gathers it.
func savedCut(g *training.Graph, r *Result, i int, v string, tp int) float64 {
	if v == "" {
		return r.Layouts[i].cut(tp)
	}
	p, made := g.Producer(v)
	if !made || r.Layouts[i].GatherInputs {
		return 1
	}
	if st := r.Layouts[p].Style; st == Colwise || st == Sharded {
		return 1 / float64(tp)
	}
	return 1
}

// blocks gives each operator its block, the unit recomputation keeps the
// inputs of: the item of a repeated module its module path names
// ("layers.3" for layers.3.q, "layer1.0" for layer1.0.conv1). An operator
// outside any module (a ReLU torch.onnx names /Relu_3) joins the block of
// the operator before it; those before the first block are in none (−1).
func blocks(g *training.Graph) []int {
	out := make([]int, len(g.Ops))
	ids := map[string]int{}
	cur := -1
	for i, op := range g.Ops {
		if key := blockOf(op.Module); key != "" {
			id, ok := ids[key]
			if !ok {
				id = len(ids)
				ids[key] = id
			}
			cur = id
		}
		out[i] = cur
	}
	return out
}

// blockOf is a module path up to its first index: "layers.3.q" is
// "layers.3"; "" when it has none.
func blockOf(module string) string {
	parts := strings.Split(module, ".")
	for i, p := range parts {
		if _, err := strconv.Atoi(p); err == nil && i > 0 {
			return strings.Join(parts[:i+1], ".")
		}
	}
	return ""
}
