package plan

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"rulebook/cluster"
	"rulebook/onnx"
	"rulebook/simulate"
	"rulebook/training"
)

// Model-parallel embeddings, as TorchRec and the DLRM paper run them
// (docs/planner.md, "Embedding tables"): the embedding tables are spread
// over the devices and the rest of the model is data parallel. A step
// sends each replica's indices to the tables' owners (an all-to-all),
// looks them up there for the whole batch, and sends every replica its
// share of the rows (a second all-to-all); backward sends the rows'
// gradients back the same way. The tables' gradients are not all-reduced:
// each owner updates its own rows.
//
//   - Table-wise: each table whole on one device, the largest first onto
//     the device holding least so far.
//   - Row-wise: each table cut by rows over every device; each looks up
//     the indices that fall in its rows.

// Embedding is the family of these strategies (--strategy emb).
const Embedding Kind = "emb"

// EmbeddingSharding is how the tables are spread over the devices.
type EmbeddingSharding string

// The shardings, as labels and plan.json spell them.
const (
	TableWise EmbeddingSharding = "table"
	RowWise   EmbeddingSharding = "row"
)

// ErrNoTables marks a request for --strategy emb on a model without
// embedding tables.
var ErrNoTables = errors.New("the model has no embedding tables (a Gather on a weight)")

// embeddingCandidates are the embedding strategies on n devices: the
// dense part data parallel over all of them, the tables table-wise or
// row-wise.
func embeddingCandidates(n int) []Strategy {
	var out []Strategy
	for _, e := range []EmbeddingSharding{TableWise, RowWise} {
		out = append(out, Strategy{Kind: Embedding, DP: n, TP: 1, PP: 1, Microbatches: 1, Embedding: e})
	}
	return out
}

// lookups are the operators that look rows up in an embedding table: a
// Gather whose data is a weight and whose indices carry the batch. None
// when any table is read by another operator too (a tied output
// projection), which would need the whole table on every device.
func lookups(g *training.Graph) []int {
	var out []int
	for i, op := range g.Ops {
		if !op.Lookup || !g.HasBatch(op.Inputs[1]) {
			continue
		}
		if len(g.Consumers(op.Inputs[0])) != 1 {
			return nil
		}
		out = append(out, i)
	}
	return out
}

// tables is where the embedding tables lie, as the priced device (the one
// holding most of them) sees it.
type tables struct {
	sharding EmbeddingSharding
	// share is the part of each lookup's table, and of its rows looked up,
	// on the priced device (0 where another device owns it); only lookups
	// have an entry.
	share map[int]float64
	// owner is each table's device, table-wise; row-wise every device holds
	// a 1/n of every table.
	owner   map[int]int
	devices int
}

// placeTables spreads g's tables over n devices.
func placeTables(g *training.Graph, e EmbeddingSharding, n int) *tables {
	ls := lookups(g)
	t := &tables{sharding: e, share: map[int]float64{}, owner: map[int]int{}, devices: n}
	if e == RowWise {
		for _, i := range ls {
			t.share[i] = 1 / float64(n)
		}
		return t
	}
	// largest first onto the least loaded device (ties to the lowest), so
	// that no device holds much more than its share
	order := slices.Clone(ls)
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(g.Ops[b].ParamBytes, g.Ops[a].ParamBytes) })
	load := make([]float64, n)
	for _, i := range order {
		d := 0
		for k := range load {
			if load[k] < load[d] {
				d = k
			}
		}
		load[d] += g.Ops[i].ParamBytes
		t.owner[i] = d
	}
	fullest := 0
	for k := range load {
		if load[k] > load[fullest] {
			fullest = k
		}
	}
	for _, i := range ls {
		if t.owner[i] == fullest {
			t.share[i] = 1
		} else {
			t.share[i] = 0
		}
	}
	return t
}

// weightShare is the part of op i's weights on the priced device: its
// tensor-parallel cut, or its table's share.
func (r *Result) weightShare(i int, tp int) float64 {
	if r.tables != nil {
		if s, ok := r.tables.share[i]; ok {
			return s
		}
	}
	return r.Layouts[i].cut(tp)
}

// isLookup reports whether op i is a model-parallel table's lookup.
func (r *Result) isLookup(i int) bool {
	if r.tables == nil {
		return false
	}
	_, ok := r.tables.share[i]
	return ok
}

// priceLookups sets each lookup's cost on the priced device: its share of
// the rows of every replica's micro-batch, not one replica's.
func (t *tables) priceLookups(g *training.Graph, c *costs, out []OpCost, microbatches int) {
	for i, s := range t.share {
		if s == 0 {
			out[i] = OpCost{}
			continue
		}
		// cut is the device's part of the table and of the rows looked up
		out[i] = c.op(g, g.Ops[i], piece{share: 1 / float64(microbatches), cut: s, style: Replicated})
	}
}

// exchange is the bytes one device sends in each all-to-all of
// micro-batch: the indices (int64) of its replica's rows for every
// table, and the looked-up rows it owns for every replica (as many
// bytes as their gradients in backward) in fp32: autocast leaves
// embeddings in fp32, and TorchRec sends them so unless told to quantize.
func (b *builder) exchange() (ids, rows float64) {
	for _, i := range b.lookupOrder() {
		op, s := b.g.Ops[i], b.r.tables.share[i]
		ids += 2 * b.g.ValueBytes(op.Inputs[1]) * b.micro // training counts 4 bytes an element
		rows += s * b.g.ValueBytes(op.Outputs[0]) * b.micro * float64(b.s.DP)
	}
	return ids, rows
}

func idsKey(j int) string   { return fmt.Sprintf("emb ids #%d", j) }
func rowsKey(j int) string  { return fmt.Sprintf("emb rows #%d", j) }
func gradsKey(j int) string { return fmt.Sprintf("emb row grads #%d", j) }

// sendIndices adds micro-batch j's all-to-all of indices, which the
// lookups wait for.
func (b *builder) sendIndices(j int) {
	ids, _ := b.exchange()
	res, t := b.exchangeCost(ids)
	b.add(idsKey(j), "all-to-all embedding indices", simulate.Communication, res, t)
}

// exchangeCost is the resource and time of an all-to-all of bytes per
// device over every device.
func (b *builder) exchangeCost(bytes float64) (int, float64) {
	all := make(cluster.Group, b.s.Devices())
	for d := range all {
		all[d] = d
	}
	res := 1
	if b.o.Machine.Place(all).Spans() {
		res = 2
	}
	return res, b.o.Machine.AllToAll(all, bytes)
}

// sendRows adds micro-batch j's all-to-all of looked-up rows, once every
// lookup is done, and makes the lookups' outputs arrive with it.
func (b *builder) sendRows(j int) {
	_, rows := b.exchange()
	var deps []string
	for _, i := range b.lookupOrder() {
		deps = append(deps, fmt.Sprintf("fwd %s #%d", b.g.Ops[i].Name, j))
	}
	res, t := b.exchangeCost(rows)
	b.add(rowsKey(j), "all-to-all embedding rows", simulate.Communication, res, t, deps...)
	for _, i := range b.lookupOrder() {
		for _, v := range b.g.Ops[i].Outputs {
			b.keys[valueKey(v, j)] = b.keys[rowsKey(j)]
		}
	}
}

// sendRowGrads adds micro-batch j's all-to-all of the rows' gradients
// back to the tables' owners, once every reader of the rows has its
// backward done; the lookups' backward waits for it.
func (b *builder) sendRowGrads(j int) {
	if _, done := b.keys[gradsKey(j)]; done {
		return
	}
	_, rows := b.exchange()
	var deps []string
	for _, i := range b.lookupOrder() {
		for _, v := range b.g.Ops[i].Outputs {
			for _, c := range b.g.Consumers(v) {
				deps = append(deps, gradKey(b.g.Ops[c].Name, j))
			}
		}
	}
	res, t := b.exchangeCost(rows)
	b.add(gradsKey(j), "all-to-all embedding row gradients", simulate.Communication, res, t, deps...)
}

// lookupOrder is the lookups in graph order.
func (b *builder) lookupOrder() []int {
	var out []int
	for i := range b.g.Ops {
		if b.r.isLookup(i) {
			out = append(out, i)
		}
	}
	return out
}

// embeddingLabel is the layout label's suffix: "+emb(table)".
func (s Strategy) embeddingLabel() string {
	if s.Embedding == "" {
		return ""
	}
	return "+emb(" + string(s.Embedding) + ")"
}

// TableFile is one embedding table's place in plan.json: the devices
// holding it, each a 1/len(devices) of its rows.
type TableFile struct {
	Operator string  `json:"operator"`
	Weight   string  `json:"weight"`
	Bytes    float64 `json:"bytes"`
	Devices  []int   `json:"devices"`
}

// tableFiles lists the tables in graph order; none outside the emb
// family.
func (r *Result) tableFiles(g *training.Graph) []TableFile {
	if r.tables == nil {
		return nil
	}
	var out []TableFile
	for i, op := range g.Ops {
		if !r.isLookup(i) {
			continue
		}
		out = append(out, TableFile{Operator: op.Name, Weight: op.Inputs[0], Bytes: op.ParamBytes, Devices: r.tables.holders(i)})
	}
	return out
}

// holders are the devices holding op i's table.
func (t *tables) holders(i int) []int {
	if t.sharding == TableWise {
		return []int{t.owner[i]}
	}
	all := make([]int, t.devices)
	for d := range all {
		all[d] = d
	}
	return all
}

// tableSpec is the IR 11 sharding of a table, v of lookup i: whole on its
// owner, or cut by rows (axis 0) over every device. ok is false for any
// other tensor. A row-wise plan's rows divide evenly (rowsDivide), as
// IR 11's equal shards need.
func (r *Result) tableSpec(g *training.Graph, i int, v string) (onnx.ShardingSpec, bool) {
	if !r.isLookup(i) || v != g.Ops[i].Inputs[0] {
		return onnx.ShardingSpec{}, false
	}
	spec := onnx.ShardingSpec{TensorName: v}
	for _, d := range r.tables.holders(i) {
		spec.Devices = append(spec.Devices, int64(d))
	}
	if r.tables.sharding == TableWise {
		return spec, true
	}
	rows := g.ValueShape(v)[0]
	spec.ShardedDims = []onnx.ShardedDim{{Axis: 0, DimValue: rows, NumShards: int64(r.tables.devices)}}
	return spec, true
}

// rowsDivide refuses a row-wise plan whose tables' rows do not split into
// n equal shards: a table would be priced at a share no device holds.
func rowsDivide(g *training.Graph, n int) error {
	for _, i := range lookups(g) {
		w := g.Ops[i].Inputs[0]
		if shape := g.ValueShape(w); len(shape) == 0 || shape[0]%int64(n) != 0 {
			return fmt.Errorf("table %s's %v rows do not divide by the %d devices", w, shape, n)
		}
	}
	return nil
}
