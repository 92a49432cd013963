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
//   - Column-wise: each table cut by columns (its embedding dimension)
//     into k shards, k the largest divisor of the dimension up to the
//     devices that leaves shards of MinColumnShard columns or more, each
//     shard on one of the k least loaded devices. Every
//     shard owner looks up every index of its table, so the indices go
//     to all k owners; the rows come back as k slices of every row.

// Embedding is the family of these strategies (--strategy emb).
const Embedding Kind = "emb"

// EmbeddingSharding is how the tables are spread over the devices.
type EmbeddingSharding string

// The shardings, as labels and plan.json spell them.
const (
	TableWise  EmbeddingSharding = "table"
	RowWise    EmbeddingSharding = "row"
	ColumnWise EmbeddingSharding = "column"
)

// ErrNoTables marks a request for --strategy emb on a model without
// embedding tables.
var ErrNoTables = errors.New("the model has no embedding tables (a Gather on a weight)")

// embeddingCandidates are the embedding strategies on n devices: the
// dense part data parallel over all of them, the tables table-wise,
// row-wise or column-wise. The emb family keeps the fastest that fits.
func embeddingCandidates(n int) []Strategy {
	var out []Strategy
	for _, e := range []EmbeddingSharding{TableWise, RowWise, ColumnWise} {
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
	// on the priced device (0 where it holds none of it); only lookups
	// have an entry.
	share map[int]float64
	// owners are the devices of each table's shards, in column order:
	// one table-wise, k column-wise; row-wise every device holds a 1/n of
	// every table's rows, and owners is empty.
	owners  map[int][]int
	devices int
}

// placeTables spreads g's tables over n devices.
func placeTables(g *training.Graph, e EmbeddingSharding, n int) *tables {
	ls := lookups(g)
	t := &tables{sharding: e, share: map[int]float64{}, owners: map[int][]int{}, devices: n}
	if e == RowWise {
		for _, i := range ls {
			t.share[i] = 1 / float64(n)
		}
		return t
	}
	// largest table first, its shards onto the least loaded devices (ties
	// to the lowest), so that no device holds much more than its share
	order := slices.Clone(ls)
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(g.Ops[b].ParamBytes, g.Ops[a].ParamBytes) })
	load := make([]float64, n)
	for _, i := range order {
		k := 1
		if e == ColumnWise {
			k = columnShards(g, i, n)
		}
		devices := leastLoaded(load, k)
		for _, d := range devices {
			load[d] += g.Ops[i].ParamBytes / float64(k)
		}
		t.owners[i] = devices
	}
	fullest := 0
	for d := range load {
		if load[d] > load[fullest] {
			fullest = d
		}
	}
	for _, i := range ls {
		if slices.Contains(t.owners[i], fullest) {
			t.share[i] = 1 / float64(len(t.owners[i]))
		} else {
			t.share[i] = 0
		}
	}
	return t
}

// MinColumnShard is the narrowest column shard, in columns: TorchRec's
// planner cuts no narrower (its MIN_CW_DIM), since a lookup of a few
// columns of a row cannot use the memory system or the lookup kernel's
// threads well, which this cost model does not price. A table under
// twice this width is not cut by columns.
const MinColumnShard = 128

// ErrNarrowTables marks a column-wise plan for a model whose tables are
// all too narrow to cut by columns: it would be table-wise under another
// label.
var ErrNarrowTables = errors.New("no embedding table is wide enough to cut by columns")

// columnShards is how many column shards lookup i's table is cut into on n
// devices: the largest divisor of its embedding dimension up to n that
// leaves every shard whole columns, at least MinColumnShard of them, so
// that no device holds two shards of one table.
func columnShards(g *training.Graph, i, n int) int {
	shape := g.ValueShape(g.Ops[i].Inputs[0])
	if len(shape) != 2 {
		return 1
	}
	dim := shape[1]
	for k := min(dim/MinColumnShard, int64(n)); k > 1; k-- {
		if dim%k == 0 {
			return int(k)
		}
	}
	return 1
}

// columnsCut refuses a column-wise plan on n devices that would cut no
// table.
func columnsCut(g *training.Graph, n int) error {
	for _, i := range lookups(g) {
		if columnShards(g, i, n) > 1 {
			return nil
		}
	}
	return fmt.Errorf("every table is under %d columns, or cannot be cut into shards of at least %d over %d devices: %w", 2*MinColumnShard, MinColumnShard, n, ErrNarrowTables)
}

// leastLoaded is the k devices holding least (ties to the lowest), in
// device order.
func leastLoaded(load []float64, k int) []int {
	order := make([]int, len(load))
	for d := range order {
		order[d] = d
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(load[a], load[b]) })
	out := slices.Clone(order[:k])
	slices.Sort(out)
	return out
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
// table, to each owner that looks them up (one table-wise and row-wise,
// every shard's owner column-wise), and the looked-up rows it owns for
// every replica (as many bytes as their gradients in backward) in fp32:
// autocast leaves embeddings in fp32, and TorchRec sends them so unless
// told to quantize.
func (b *builder) exchange() (ids, rows float64) {
	for _, i := range b.lookupOrder() {
		op, s := b.g.Ops[i], b.r.tables.share[i]
		copies := float64(max(1, len(b.r.tables.owners[i])))       // row-wise: one owner an index
		ids += 2 * b.g.ValueBytes(op.Inputs[1]) * b.micro * copies // training counts 4 bytes an element
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
// holding it, each a 1/len(devices) of it, cut by rows or by columns
// (in column order) where more than one holds it.
type TableFile struct {
	Operator string  `json:"operator"`
	Weight   string  `json:"weight"`
	Bytes    float64 `json:"bytes"`
	Devices  []int   `json:"devices"`
	// Cut is "rows" or "columns" where the table is cut; absent where one
	// device holds it whole.
	Cut string `json:"cut,omitempty"`
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
		f := TableFile{Operator: op.Name, Weight: op.Inputs[0], Bytes: op.ParamBytes, Devices: r.tables.holders(i)}
		if axis, cut := r.tables.cutAxis(i); cut {
			f.Cut = map[int]string{0: "rows", 1: "columns"}[axis]
		}
		out = append(out, f)
	}
	return out
}

// cutAxis is the axis op i's table is cut on: 0 row-wise, 1 column-wise;
// cut is false where one device holds it whole.
func (t *tables) cutAxis(i int) (axis int, cut bool) {
	switch {
	case t.sharding == RowWise:
		return 0, true
	case len(t.owners[i]) > 1:
		return 1, true
	}
	return 0, false
}

// holders are the devices holding op i's table, in shard order.
func (t *tables) holders(i int) []int {
	if t.sharding != RowWise {
		return t.owners[i]
	}
	all := make([]int, t.devices)
	for d := range all {
		all[d] = d
	}
	return all
}

// tableSpec is the IR 11 sharding of a table, v of lookup i: whole on its
// owner, cut by rows (axis 0) over every device, or by columns (axis 1)
// over its shards' owners. ok is false for any other tensor. A row-wise
// plan's rows divide evenly (rowsDivide), and column shards are whole
// divisors of the dimension (columnShards), as IR 11's equal shards need.
func (r *Result) tableSpec(g *training.Graph, i int, v string) (onnx.ShardingSpec, bool) {
	if !r.isLookup(i) || v != g.Ops[i].Inputs[0] {
		return onnx.ShardingSpec{}, false
	}
	spec := onnx.ShardingSpec{TensorName: v}
	for _, d := range r.tables.holders(i) {
		spec.Devices = append(spec.Devices, int64(d))
	}
	axis, cut := r.tables.cutAxis(i)
	if !cut {
		return spec, true
	}
	spec.ShardedDims = []onnx.ShardedDim{{Axis: int64(axis), DimValue: g.ValueShape(v)[axis], NumShards: int64(len(spec.Devices))}}
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
