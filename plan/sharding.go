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
func shardTensor(g *training.Graph, op training.Op, v string, s Strategy, l OpLayout, stage int, cuts map[string]int) (onnx.ShardingSpec, bool) {
	shape := g.ValueShape(v)
	if v == "" || len(shape) == 0 {
		return onnx.ShardingSpec{}, false
	}
	batch, feature := -1, -1
	if g.HasBatch(v) && s.DP > 1 {
		batch = 0
	}
	if s.TP > 1 {
		feature = featureAxis(g, op, v, l, cuts)
	}
	if feature == batch {
		// a cut that lands on the batch axis is not annotated twice
		feature = -1
	}
	spec := onnx.ShardingSpec{TensorName: v}
	dims := []struct{ axis, shards int }{{batch, s.DP}, {feature, s.TP}}
	for _, d := range dims {
		if d.axis >= 0 && shape[d.axis] > 0 && shape[d.axis]%int64(d.shards) == 0 {
			spec.ShardedDims = append(spec.ShardedDims, onnx.ShardedDim{Axis: int64(d.axis), DimValue: shape[d.axis], NumShards: int64(d.shards)})
		}
	}
	if len(spec.ShardedDims) == 0 {
		return onnx.ShardingSpec{}, false
	}
	base := stage * s.DP * s.TP
	cutBatch := batch >= 0 && spec.ShardedDims[0].Axis == int64(batch)
	cutFeature := spec.ShardedDims[len(spec.ShardedDims)-1].Axis != int64(batch) || !cutBatch
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
func featureAxis(g *training.Graph, op training.Op, v string, l OpLayout, cuts map[string]int) int {
	if p := op.Product; p != nil && v == p.Weight {
		switch l.Style {
		case Colwise:
			return p.WeightOutAxis
		case Rowwise:
			return p.WeightInAxis
		}
		return -1
	}
	rank := len(g.ValueShape(v))
	switch {
	case contains(op.Outputs, v):
		if l.sliced() {
			return l.Axis
		}
	case l.Style == Rowwise && v == op.Inputs[0]:
		return featureAxisOf(op, rank)
	case l.Style == Colwise:
		// a Gemm's or Conv's bias is cut with the output features
		if _, produced := g.Producer(v); !produced && !g.IsInput(v) && rank == 1 {
			return 0
		}
	case l.Style == Sharded:
		if a, ok := cuts[v]; ok {
			return a
		}
		return biasAxis(g, op, v, l)
	}
	return -1
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

// sliceAxes maps each value tensor parallelism cuts to its axis, from the
// layouts of the operators that make them.
func sliceAxes(g *training.Graph, layouts []OpLayout) map[string]int {
	cuts := map[string]int{}
	for i, op := range g.Ops {
		if layouts[i].sliced() {
			for _, v := range op.Outputs {
				cuts[v] = layouts[i].Axis
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
