package plan

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"rulebook/cluster"
	"rulebook/onnx"
	"rulebook/training"
)

func dlrmGraph(t *testing.T, batch int64) *training.Graph {
	t.Helper()
	g, err := training.FromONNX(training.DLRM(training.SmallDLRM), "dlrm", batch)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func parseMachine(t *testing.T, spec string) cluster.Machine {
	t.Helper()
	m, err := cluster.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// tableBytes is the bytes of every table of g, and of the rest.
func tableBytes(g *training.Graph) (tables, dense float64) {
	for _, i := range lookups(g) {
		tables += g.Ops[i].ParamBytes
	}
	return tables, 4*g.Params() - tables
}

// TestEmbeddingTablesHeldOnce: the embedding strategies keep each table
// once over the devices, not once per replica: the fullest device holds
// the dense weights and its tables (whole tables table-wise, spread by
// size; a 1/n of each row-wise), and plan.json names one device per
// table table-wise, every device row-wise. Data parallelism holds them all.
func TestEmbeddingTablesHeldOnce(t *testing.T) {
	g := dlrmGraph(t, 1024)
	tables, dense := tableBytes(g)
	one := g.Ops[lookups(g)[0]].ParamBytes // SmallDLRM's tables are all one size
	for _, c := range []struct {
		machine  string
		e        EmbeddingSharding
		held     float64 // table bytes on the fullest device
		holders  int     // devices per table in plan.json
		perTable int     // most tables on one device, table-wise
	}{
		{"h100:2", TableWise, one, 1, 1},       // 8 tables on 16 devices
		{"h100:1x4", TableWise, 2 * one, 1, 2}, // 8 tables on 4 devices
		{"h100:1", TableWise, one, 1, 1},
		{"h100:2", RowWise, tables / 16, 16, 0},
		{"h100:1x4", RowWise, tables / 4, 4, 0},
	} {
		t.Run(c.machine+"/"+string(c.e), func(t *testing.T) {
			m := parseMachine(t, c.machine)
			n := m.NumDevices()
			s := Strategy{Kind: Embedding, DP: n, TP: 1, PP: 1, Microbatches: 1, Embedding: c.e}
			r, err := Price(context.Background(), g, s, Options{Machine: m})
			if err != nil || r.Err != nil {
				t.Fatal(err, r.Err)
			}
			if got := r.Memory.Weights; !near(got, dense+c.held) {
				t.Errorf("weights on the fullest device: %.0f bytes, want %.0f dense + %.0f of tables", got, dense, c.held)
			}
			if r.Memory.Optimizer != 2*r.Memory.Weights || r.Memory.Gradients != r.Memory.Weights {
				t.Errorf("gradients %.0f and Adam %.0f do not follow the weights held %.0f", r.Memory.Gradients, r.Memory.Optimizer, r.Memory.Weights)
			}
			perDevice := map[int]int{}
			files := r.tableFiles(g)
			if len(files) != len(lookups(g)) {
				t.Fatalf("plan.json lists %d tables, want %d", len(files), len(lookups(g)))
			}
			for _, f := range files {
				if len(f.Devices) != c.holders {
					t.Errorf("%s is on %v, want %d devices", f.Weight, f.Devices, c.holders)
				}
				for _, d := range f.Devices {
					perDevice[d]++
				}
			}
			if c.e == TableWise {
				for d, k := range perDevice {
					if k > c.perTable {
						t.Errorf("device %d holds %d tables, want at most %d (spread by size)", d, k, c.perTable)
					}
				}
			}
			dp, err := Price(context.Background(), g, Strategy{Kind: DataParallel, DP: n, TP: 1, PP: 1, Microbatches: 1}, Options{Machine: m})
			if err != nil || dp.Err != nil {
				t.Fatal(err, dp.Err)
			}
			if !near(dp.Memory.Weights, dense+tables) {
				t.Errorf("data parallel holds %.0f bytes of weights, want every table: %.0f", dp.Memory.Weights, dense+tables)
			}
		})
	}
}

func near(a, b float64) bool { return a-b < 1e-6*b && b-a < 1e-6*b }

// TestEmbeddingAllToAllPaysTheNetwork: the looked-up rows and their
// gradients are exchanged by all-to-alls over every device, priced as
// cluster prices an all-to-all of the bytes one device sends (its tables'
// rows for the whole batch, in fp32 under bf16 autocast), on the intra-node link within one
// node and on the network across two, where it costs more. The tables'
// gradients are not all-reduced: no data-parallel bucket waits for a
// lookup's backward.
func TestEmbeddingAllToAllPaysTheNetwork(t *testing.T) {
	const batch = 1024
	g := dlrmGraph(t, batch)
	dim := training.SmallDLRM.Dim
	for _, c := range []struct {
		machine string
		e       EmbeddingSharding
		rows    float64 // rows one device sends per step
		network bool
	}{
		{"h100:1", TableWise, batch, false}, // one table a device
		{"h100:2", TableWise, batch, true},
		{"h100:2", RowWise, 8 * batch / 16, true}, // a 16th of all 8 tables' lookups
	} {
		t.Run(c.machine+"/"+string(c.e), func(t *testing.T) {
			m := parseMachine(t, c.machine)
			n := m.NumDevices()
			s := Strategy{Kind: Embedding, DP: n, TP: 1, PP: 1, Microbatches: 1, Embedding: c.e}
			r, err := Price(context.Background(), g, s, Options{Machine: m})
			if err != nil || r.Err != nil {
				t.Fatal(err, r.Err)
			}
			all := make(cluster.Group, n)
			for d := range all {
				all[d] = d
			}
			bytes := c.rows * float64(dim) * 4 // fp32: autocast leaves embeddings be
			want := m.AllToAll(all, bytes)
			for _, name := range []string{"all-to-all embedding rows", "all-to-all embedding row gradients"} {
				ts := tasksNamed(r.Schedule, name)
				if len(ts) != 1 {
					t.Fatalf("%d tasks %q, want 1", len(ts), name)
				}
				if ts[0].Duration != want {
					t.Errorf("%s: %v s, want cluster's all-to-all of %.0f bytes over %d devices, %v s", name, ts[0].Duration, bytes, n, want)
				}
				if onNetwork := r.Schedule.Resources[ts[0].Resource].Name == "stage 0: device 0 network"; onNetwork != c.network {
					t.Errorf("%s runs on %s; want the network: %v", name, r.Schedule.Resources[ts[0].Resource].Name, c.network)
				}
			}
			if c.network {
				inNode := parseMachine(t, "h100:1")
				if local := inNode.AllToAll(all[:8], bytes); want <= local {
					t.Errorf("across nodes %v s, not more than within a node %v s", want, local)
				}
			}
			for k, task := range r.Schedule.Tasks {
				if !strings.Contains(task.Name, "weight grads") {
					continue
				}
				for _, d := range r.Schedule.Tasks[k].Deps {
					if dep := r.Schedule.Tasks[d].Name; strings.HasPrefix(dep, "/emb.") {
						t.Errorf("%s waits on %s: a table's gradient is all-reduced", task.Name, dep)
					}
				}
			}
		})
	}
}

// TestDLRMChoosesEmbeddingTables: DLRM on two H100 nodes (batch 64 a
// device, as BENCHMARKS.md's planner tables) is planned as TorchRec runs
// it, its tables spread over the devices, not as a 16-stage pipeline;
// DTensor cannot express that plan, and --emit torch says so. A model
// without tables has no emb strategy, and a row-wise cut whose rows do
// not divide over the devices is not priced.
func TestDLRMChoosesEmbeddingTables(t *testing.T) {
	g := dlrmGraph(t, 1024)
	c, err := Choose(context.Background(), g, Kinds, Options{Machine: parseMachine(t, "h100:2")})
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Chosen.Strategy; s.Kind != Embedding || s.PP != 1 {
		t.Fatalf("chose %s, want the emb family", s)
	}
	eachTableAnnotation(t, training.DLRM(training.SmallDLRM), g, c, func(spec onnx.ShardingSpec, want []int64) {
		cut := len(want) > 1 // row-wise: axis 0 in one shard a device
		if !slices.Equal(spec.Devices, want) || (len(spec.ShardedDims) == 1) != cut || (cut && spec.ShardedDims[0].NumShards != int64(len(want))) {
			t.Errorf("%s annotated on %v cut %v, want on %v, cut by rows: %v", spec.TensorName, spec.Devices, spec.ShardedDims, want, cut)
		}
	})
	if _, err := c.Torch(g); !errors.Is(err, ErrNotTorch) {
		t.Errorf("--emit torch of %s: %v, want ErrNotTorch", c.Chosen.Strategy, err)
	}
	if _, err := Choose(context.Background(), mlpGraph(t, 2, 64, 8), []Kind{Embedding}, Options{Machine: machine(2)}); !errors.Is(err, ErrNoTables) {
		t.Errorf("--strategy emb on an MLP: %v, want ErrNoTables", err)
	}
	six := Strategy{Kind: Embedding, DP: 6, TP: 1, PP: 1, Microbatches: 1, Embedding: RowWise}
	r, err := Price(context.Background(), dlrmGraph(t, 384), six, Options{Machine: parseMachine(t, "summit:1")})
	if err != nil || r.Err == nil {
		t.Errorf("row-wise over 6 devices of 1,000,000-row tables: %v, %v; want not priced", err, r)
	}
}

// TestLookupReadsRows: a lookup is priced reading the rows it gathers,
// whatever its table's size, in every strategy; its backward writes the
// table's dense gradient in fp32 (nn.Embedding's, which autocast leaves
// in fp32), so it grows by the table's bytes at memory bandwidth.
func TestLookupReadsRows(t *testing.T) {
	m := parseMachine(t, "h100:1")
	c := newCosts(m.Device, cluster.BF16, nil)
	var fwd, bwd []float64
	var params []float64
	for _, rows := range []int64{1000, 1_000_000} {
		g, err := training.FromONNX(training.DLRM(training.DLRMConfig{Dense: 4, Bottom: []int64{8}, Top: []int64{1}, Tables: 1, Rows: rows, Dim: 64}), "dlrm", 32)
		if err != nil {
			t.Fatal(err)
		}
		i := lookups(g)[0]
		cost := c.op(g, g.Ops[i], piece{share: 1, cut: 1})
		fwd, bwd, params = append(fwd, cost.Forward), append(bwd, cost.Backward), append(params, g.Ops[i].ParamBytes)
	}
	if fwd[0] != fwd[1] {
		t.Errorf("forward at 1000 and 1,000,000 rows: %v s and %v s, want the same", fwd[0], fwd[1])
	}
	if want := (params[1] - params[0]) / m.Device.MemoryBandwidth; !near(bwd[1]-bwd[0], want) {
		t.Errorf("backward grows by %v s with the table, want its fp32 gradient at memory bandwidth, %v s", bwd[1]-bwd[0], want)
	}
}

// TestTiedTableNotPlaced: a table that another operator reads too (an
// output projection tied to the embedding, as language models tie them)
// would be needed whole on every device, so it gets no emb strategy; the
// same table read by its lookup alone does.
func TestTiedTableNotPlaced(t *testing.T) {
	for _, c := range []struct {
		name   string
		tied   bool
		tables int
	}{
		{"lookup alone", false, 1},
		{"tied projection", true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &onnx.Tensor{Name: "table", Dims: []int64{100, 8}, DataType: onnx.Float, FloatData: make([]float32, 800)}
			p := &onnx.Tensor{Name: "proj", Dims: []int64{100, 8}, DataType: onnx.Float, FloatData: make([]float32, 800)}
			projected := "proj"
			if c.tied {
				projected = "table"
			}
			ids := &onnx.ValueInfo{Name: "ids", IsTensor: true, ElemType: onnx.Int64, HasShape: true, Shape: []onnx.Dim{{Param: "N"}}}
			y := &onnx.ValueInfo{Name: "y", IsTensor: true, ElemType: onnx.Float}
			m := &onnx.Model{IRVersion: 8, OpsetImports: []onnx.OperatorSetID{{Version: 17}}, Graph: &onnx.Graph{Name: "tied",
				Nodes: []*onnx.Node{
					{Name: "/emb/Gather", OpType: "Gather", Inputs: []string{"table", "ids"}, Outputs: []string{"rows"}},
					{Name: "/head/Gemm", OpType: "Gemm", Inputs: []string{"rows", projected}, Outputs: []string{"y"}, Attributes: []*onnx.Attribute{intAttr("transB", 1)}},
				},
				Inputs: []*onnx.ValueInfo{ids}, Outputs: []*onnx.ValueInfo{y}, Initializers: []*onnx.Tensor{w, p}}}
			g, err := training.FromONNX(m, "tied", 8)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(lookups(g)); got != c.tables {
				t.Errorf("%d tables placed, want %d", got, c.tables)
			}
			_, err = Choose(context.Background(), g, []Kind{Embedding}, Options{Machine: machine(2)})
			if noTables := errors.Is(err, ErrNoTables); noTables != (c.tables == 0) || (err != nil && !noTables) {
				t.Errorf("--strategy emb: %v", err)
			}
		})
	}
}

// TestColumnWiseEmbedding: column-wise sharding cuts each table's
// embedding dimension into k shards of at least MinColumnShard columns
// (the largest divisor up to the devices), each on one of the k least
// loaded devices. Every owner looks up all of its table's indices, so
// each replica's indices go to all k owners, and each owner sends every
// replica its slice of the rows. It wins where tables are few and wide
// and their rows do not divide over the devices (row-wise is not priced,
// and table-wise leaves one device a whole table's rows for the whole
// batch); where rows divide, row-wise sends each index to one owner only
// and stays the faster. DLRM's 64-column tables are too narrow to cut.
func TestColumnWiseEmbedding(t *testing.T) {
	wide := func(rows int64) training.DLRMConfig {
		return training.DLRMConfig{Dense: 13, Bottom: []int64{64}, Top: []int64{64, 1}, Tables: 2, Rows: rows, Dim: 512}
	}
	for _, c := range []struct {
		name, machine string
		config        training.DLRMConfig
		batch         int64
		shards        int // column shards per table; 0: column-wise not priced
		rowWise       bool
		chosen        EmbeddingSharding
	}{
		{"few wide tables", "h100:1", wide(100_003), 256, 4, false, ColumnWise},
		{"wide tables whose rows divide", "h100:1", wide(100_000), 256, 4, true, RowWise},
		{"dlrm on h100:2", "h100:2", training.SmallDLRM, 1024, 0, true, RowWise},
		{"dlrm on summit:4", "summit:4", training.SmallDLRM, 1536, 0, false, TableWise},
	} {
		t.Run(c.name, func(t *testing.T) {
			model := training.DLRM(c.config)
			g, err := training.FromONNX(model, "dlrm", c.batch)
			if err != nil {
				t.Fatal(err)
			}
			m := parseMachine(t, c.machine)
			n := m.NumDevices()
			row, err := Price(context.Background(), g, Strategy{Kind: Embedding, DP: n, TP: 1, PP: 1, Microbatches: 1, Embedding: RowWise}, Options{Machine: m})
			if err != nil || (row.Err == nil) != c.rowWise {
				t.Errorf("row-wise: %v, %v; want priced: %v", err, row.Err, c.rowWise)
			}
			ch, err := Choose(context.Background(), g, []Kind{Embedding}, Options{Machine: m})
			if err != nil {
				t.Fatal(err)
			}
			if got := ch.Chosen.Strategy.Embedding; got != c.chosen {
				t.Errorf("emb chose %s, want %s", got, c.chosen)
			}
			col := Strategy{Kind: Embedding, DP: n, TP: 1, PP: 1, Microbatches: 1, Embedding: ColumnWise}
			r, err := Price(context.Background(), g, col, Options{Machine: m})
			if err != nil {
				t.Fatal(err)
			}
			if c.shards == 0 {
				if !errors.Is(r.Err, ErrNarrowTables) {
					t.Errorf("column-wise of %d-column tables: %v, want ErrNarrowTables", c.config.Dim, r.Err)
				}
				return
			}
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			holdsColumns(t, g, r, m, c.config, c.shards, c.batch)
			if c.chosen == ColumnWise {
				annotatedByColumns(t, model, g, ch, c.shards)
			}
		})
	}
}

// holdsColumns checks a column-wise plan's memory, plan.json tables and
// all-to-alls against its shards.
func holdsColumns(t *testing.T, g *training.Graph, r *Result, m cluster.Machine, c training.DLRMConfig, shards int, batch int64) {
	n := m.NumDevices()
	t.Helper()
	tables, dense := tableBytes(g)
	perShard := tables / float64(c.Tables) / float64(shards)
	most := (int(c.Tables)*shards + n - 1) / n // shards on the fullest device
	if got := r.Memory.Weights; !near(got, dense+float64(most)*perShard) {
		t.Errorf("weights on the fullest device: %.0f bytes, want %.0f dense + %d shards of %.0f", got, dense, most, perShard)
	}
	for _, f := range r.tableFiles(g) {
		if len(f.Devices) != shards || f.Cut != "columns" || len(slices.Compact(slices.Clone(f.Devices))) != shards {
			t.Errorf("%s: on %v cut %q, want %d distinct devices cut by columns", f.Weight, f.Devices, f.Cut, shards)
		}
	}
	all := make(cluster.Group, n)
	for d := range all {
		all[d] = d
	}
	replica := float64(batch) / float64(n)
	ids := float64(c.Tables) * float64(shards) * replica * 8
	rows := float64(most) * float64(batch) * float64(c.Dim/int64(shards)) * 4
	for name, bytes := range map[string]float64{"all-to-all embedding indices": ids, "all-to-all embedding rows": rows, "all-to-all embedding row gradients": rows} {
		ts := tasksNamed(r.Schedule, name)
		if want := m.AllToAll(all, bytes); len(ts) != 1 || ts[0].Duration != want {
			t.Errorf("%s: %v, want one all-to-all of %.0f bytes, %v s", name, ts, bytes, want)
		}
	}
}

// annotatedByColumns checks that the chosen plan's IR 11 annotations cut
// every table on axis 1 over the devices plan.json names.
func annotatedByColumns(t *testing.T, model *onnx.Model, g *training.Graph, ch *Choice, shards int) {
	t.Helper()
	eachTableAnnotation(t, model, g, ch, func(spec onnx.ShardingSpec, want []int64) {
		if !slices.Equal(spec.Devices, want) || len(spec.ShardedDims) != 1 || spec.ShardedDims[0].Axis != 1 || spec.ShardedDims[0].NumShards != int64(shards) {
			t.Errorf("%s annotated on %v cut %v, want on %v, axis 1 in %d shards", spec.TensorName, spec.Devices, spec.ShardedDims, want, shards)
		}
	})
}

// eachTableAnnotation calls check with each embedding table's IR 11
// annotation in the chosen plan's sharded model and the devices
// plan.json names for the table, and fails for a table not annotated.
func eachTableAnnotation(t *testing.T, model *onnx.Model, g *training.Graph, ch *Choice, check func(spec onnx.ShardingSpec, want []int64)) {
	t.Helper()
	sharded, err := ch.Sharded(model, g)
	if err != nil {
		t.Fatal(err)
	}
	holders := map[string][]int64{}
	for _, f := range ch.Chosen.tableFiles(g) {
		for _, d := range f.Devices {
			holders[f.Weight] = append(holders[f.Weight], int64(d))
		}
	}
	for _, node := range sharded.Graph.Nodes {
		for _, spec := range node.DeviceConfigurations[0].Shardings {
			if want, table := holders[spec.TensorName]; table {
				check(spec, want)
				delete(holders, spec.TensorName)
			}
		}
	}
	if len(holders) != 0 {
		t.Errorf("tables not annotated: %v", holders)
	}
}
