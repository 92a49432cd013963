package plan

import (
	"fmt"
	"strconv"

	"rulebook/onnx"
	"rulebook/training"
)

// ShardingIRVersion is the ONNX IR version that added multi-device
// annotations (ModelProto.configuration, NodeProto.device_configurations).
const ShardingIRVersion = 11

// Sharded annotates a copy of model with the chosen plan: one device
// configuration of all the plan's devices, and on every node the sharding
// of its tensors (batch cut over the data-parallel devices, features or
// weights over the tensor-parallel ones) and its pipeline stage.
// A shard held by one device names it; a shard replicated on several
// names a group key (numbered from the device count up) that
// index_to_device_group_map expands.
func (c *Choice) Sharded(model *onnx.Model, g *training.Graph) (*onnx.Model, error) {
	s := c.Chosen.Strategy
	out := *model
	out.IRVersion = max(model.IRVersion, ShardingIRVersion)
	graph := *model.Graph
	out.Graph = &graph
	conf := onnx.DeviceConfiguration{Name: "rulebook-plan", NumDevices: int32(s.Devices())}
	for d := 0; d < s.Devices(); d++ {
		conf.Devices = append(conf.Devices, "device"+strconv.Itoa(d))
	}
	out.Configurations = []onnx.DeviceConfiguration{conf}
	cuts := sliceAxes(g, c.Chosen.Layouts)
	byName := map[string]int{}
	for i, op := range g.Ops {
		byName[op.Name] = i
	}
	graph.Nodes = make([]*onnx.Node, len(model.Graph.Nodes))
	for k, n := range model.Graph.Nodes {
		node := *n
		graph.Nodes[k] = &node
		i, ok := byName[n.Name]
		if !ok {
			return nil, fmt.Errorf("sharding: node %q (%s) is not in the training graph", n.Name, n.OpType)
		}
		nc := onnx.NodeDeviceConfiguration{ConfigurationID: conf.Name, PipelineStage: int32(c.Chosen.Stage[i])}
		for _, v := range append(append([]string{}, n.Inputs...), n.Outputs...) {
			if spec, ok := c.Chosen.tableSpec(g, i, v); ok {
				nc.Shardings = append(nc.Shardings, spec)
				continue
			}
			if spec, ok := shardTensor(g, g.Ops[i], v, s, c.Chosen.Layouts[i], c.Chosen.Stage[i], cuts); ok {
				nc.Shardings = append(nc.Shardings, spec)
			}
		}
		node.DeviceConfigurations = []onnx.NodeDeviceConfiguration{nc}
	}
	return &out, nil
}

// shardTensor is how tensor v of op is cut; ok is false for a tensor the
// plan replicates everywhere (or that has no shape).
func shardTensor(g *training.Graph, op training.Op, v string, s Strategy, l OpLayout, stage int, cuts map[string]cutAt) (onnx.ShardingSpec, bool) {
	shape := g.ValueShape(v)
	if v == "" || len(shape) == 0 {
		return onnx.ShardingSpec{}, false
	}
	batch, feature := -1, cutAt{axis: -1, groups: 1}
	if g.HasBatch(v) && s.DP > 1 {
		batch = g.BatchAxisOf(v)
	}
	if s.TP > 1 {
		feature = featureAxis(g, op, v, l, cuts)
	}
	spec := onnx.ShardingSpec{TensorName: v}
	var cutBatch, cutFeature bool
	if d, ok := mergedBatch(shape, batch, feature, s); ok {
		spec.ShardedDims, cutBatch, cutFeature = []onnx.ShardedDim{d}, true, true
	} else {
		if feature.axis == batch {
			// a cut that lands on the batch axis is not annotated twice
			feature.axis = -1
		}
		if d, ok := shardedDim(shape, cutAt{axis: batch, groups: 1}, s.DP); ok {
			spec.ShardedDims, cutBatch = append(spec.ShardedDims, d), true
		}
		if d, ok := shardedDim(shape, feature, s.TP); ok {
			spec.ShardedDims, cutFeature = append(spec.ShardedDims, d), true
		}
	}
	if len(spec.ShardedDims) == 0 {
		return onnx.ShardingSpec{}, false
	}
	base := stage * s.DP * s.TP
	// shard (i, j) of the dp × tp grid of the stage's devices, with the
	// axes the tensor is not cut on replicated
	key := int64(s.Devices())
	for i := 0; i < s.DP; i++ {
		for j := 0; j < s.TP; j++ {
			if (!cutBatch && i > 0) || (!cutFeature && j > 0) {
				continue
			}
			group := shardGroup(base, i, j, s, cutBatch, cutFeature)
			if len(group) == 1 {
				spec.Devices = append(spec.Devices, group[0])
				continue
			}
			spec.Devices = append(spec.Devices, key)
			spec.DeviceGroups = append(spec.DeviceGroups, onnx.DeviceGroup{Key: key, Devices: group})
			key++
		}
	}
	return spec, true
}

// shardedDim is the annotation of a cut into shards pieces: one level for
// a contiguous cut; for a cut in groups (a packed q, k, v projection's
// features, heads merged with the batch), the groups whole as an outer
// level and each group's part cut, as IR 11 describes an axis that a
// reshape fused from two. ok is false where the axis does not divide.
func shardedDim(shape []int64, at cutAt, shards int) (onnx.ShardedDim, bool) {
	if at.axis < 0 || at.axis >= len(shape) || shape[at.axis] <= 0 {
		return onnx.ShardedDim{}, false
	}
	n, groups := shape[at.axis], int64(max(1, at.groups))
	if n%(groups*int64(shards)) != 0 {
		return onnx.ShardedDim{}, false
	}
	d := onnx.ShardedDim{Axis: int64(at.axis), DimValue: n / groups, NumShards: int64(shards)}
	if groups > 1 {
		d.Outer = []onnx.SimpleShardedDim{{DimValue: groups, NumShards: 1}}
	}
	return d, true
}

// mergedBatch is the annotation of heads merged with the batch on its
// axis ([seq, batch·heads, head] cut in groups of the batch): the batch's
// dp cut is the outer level, each batch's heads cut tp ways within it, so
// shard (i, j) is the grid's, as for two axes. ok is false for any other
// cut.
func mergedBatch(shape []int64, batch int, feature cutAt, s Strategy) (onnx.ShardedDim, bool) {
	if batch < 0 || feature.axis != batch || feature.groups < 2 || feature.groups%s.DP != 0 {
		return onnx.ShardedDim{}, false
	}
	d, ok := shardedDim(shape, feature, s.TP)
	if ok {
		d.Outer[0].NumShards = int64(s.DP)
	}
	return d, ok
}

// shardGroup is the devices holding shard (i, j): those of row i (when the
// batch is cut) and column j (when features are), each listed once. It
// visits only the group, so the annotations grow linearly with the
// devices.
func shardGroup(base, i, j int, s Strategy, cutBatch, cutFeature bool) []int64 {
	rows, cols := []int{i}, []int{j}
	if !cutBatch {
		rows = make([]int, s.DP)
		for a := range rows {
			rows[a] = a
		}
	}
	if !cutFeature {
		cols = make([]int, s.TP)
		for b := range cols {
			cols[b] = b
		}
	}
	group := make([]int64, 0, len(rows)*len(cols))
	for _, a := range rows {
		for _, b := range cols {
			group = append(group, int64(base+a*s.TP+b))
		}
	}
	return group
}

// featureAxis is the axis of v that tensor parallelism cuts as op sees
// it, or -1: the weight's output (colwise) or input (rowwise) axis, a
// rowwise product's input features, a sliced operator's output axis and
// its inputs' axes (cuts), and a bias cut with the slice it is added to.
func featureAxis(g *training.Graph, op training.Op, v string, l OpLayout, cuts map[string]cutAt) cutAt {
	none := cutAt{axis: -1, groups: 1}
	groups := l.at().groups
	if p := op.Product; p != nil && v == p.Weight {
		switch l.Style {
		case Colwise:
			return cutAt{axis: p.WeightOutAxis, groups: groups}
		case Rowwise:
			return cutAt{axis: p.WeightInAxis, groups: 1}
		}
		return none
	}
	rank := len(g.ValueShape(v))
	switch {
	case contains(op.Outputs, v):
		if l.sliced() {
			return l.at()
		}
	case l.Style == Rowwise && v == op.Inputs[0]:
		return cutAt{axis: featureAxisOf(op, rank), groups: 1}
	case l.Style == Colwise:
		// a Gemm's or Conv's bias is cut with the output features
		if _, produced := g.Producer(v); !produced && !g.IsInput(v) && rank == 1 {
			return cutAt{axis: 0, groups: groups}
		}
	case l.Style == Sharded:
		if a, ok := cuts[v]; ok {
			return a
		}
		return cutAt{axis: biasAxis(g, op, v, l), groups: groups}
	}
	return none
}

// biasAxis is the axis of a weight or constant input of an elementwise
// sliced operator that lines up, full size, with the output's cut axis
// (a bias added after a product), or -1 when it broadcasts over it.
func biasAxis(g *training.Graph, op training.Op, v string, l OpLayout) int {
	if op.Class.Cut != training.CutElementwise {
		return -1
	}
	shape, out := g.ValueShape(v), g.ValueShape(op.Outputs[0])
	a := l.Axis - (len(out) - len(shape))
	if a < 0 || a >= len(shape) || l.Axis >= len(out) || shape[a] != out[l.Axis] {
		return -1
	}
	return a
}

// sliceAxes maps each value tensor parallelism cuts to its cut, from the
// layouts of the operators that make them.
func sliceAxes(g *training.Graph, layouts []OpLayout) map[string]cutAt {
	cuts := map[string]cutAt{}
	for i, op := range g.Ops {
		if layouts[i].sliced() {
			for _, v := range op.Outputs {
				cuts[v] = layouts[i].at()
			}
		}
	}
	return cuts
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
