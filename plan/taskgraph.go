package plan

import (
	"context"
	"fmt"

	"rulebook/cluster"
	"rulebook/simulate"
	"rulebook/training"
)

// builder writes one training step as simulator tasks: for the
// representative device of each pipeline stage, its forward and backward
// operators per micro-batch in 1F1B order, the tensor-parallel collectives
// between them, the activations and gradients sent between stages, the
// data-parallel gradient all-reduces (issued as each gradient is ready, so
// they overlap the rest of the backward pass) and the optimizer update.
//
// Dependencies are written as keys and resolved once every task exists,
// since 1F1B makes stages wait on each other in both directions.
type builder struct {
	g     *training.Graph
	s     Strategy
	o     Options
	r     *Result
	c     *costs
	micro float64 // one micro-batch per replica, as a share of the graph's batch

	resources []simulate.Resource
	tasks     []simulate.Task
	keys      map[string]int
	deps      [][]string
}

func newBuilder(g *training.Graph, s Strategy, o Options, r *Result, c *costs) *builder {
	b := &builder{g: g, s: s, o: o, r: r, c: c, keys: map[string]int{},
		micro: 1 / float64(s.DP*s.Microbatches)}
	r.Costs = c.all(g, r.Layouts, s.TP, b.micro)
	for st := 0; st < s.PP; st++ {
		dev := b.base(st)
		b.resources = append(b.resources,
			simulate.Resource{Name: fmt.Sprintf("stage %d: device %d", st, dev), Kind: simulate.Device, Device: dev},
			simulate.Resource{Name: fmt.Sprintf("stage %d: device %d intra-node link", st, dev), Kind: simulate.Link, Device: dev},
			simulate.Resource{Name: fmt.Sprintf("stage %d: device %d network", st, dev), Kind: simulate.Link, Device: dev})
	}
	// each stage's host, which launches its operators in order ahead of
	// the device (after every stage's own resources, so indices 3·stage
	// to 3·stage+2 stay the device's and its links')
	for st := 0; st < s.PP; st++ {
		b.resources = append(b.resources, simulate.Resource{Name: fmt.Sprintf("stage %d: host", st), Kind: simulate.Device, Device: -1})
	}
	return b
}

// base is the first device of a stage, which stands for all of them.
func (b *builder) base(stage int) int { return stage * b.s.DP * b.s.TP }

func (b *builder) tpGroup(stage int) cluster.Group {
	g := make(cluster.Group, b.s.TP)
	for i := range g {
		g[i] = b.base(stage) + i
	}
	return g
}

func (b *builder) dpGroup(stage int) cluster.Group {
	g := make(cluster.Group, b.s.DP)
	for i := range g {
		g[i] = b.base(stage) + i*b.s.TP
	}
	return g
}

// link is the stage's link resource a collective over group uses: the
// network when the group spans nodes.
func (b *builder) link(stage int, group cluster.Group) int {
	per := b.o.Machine.DevicesPerNode
	for _, d := range group {
		if d/per != group[0]/per {
			return 3*stage + 2
		}
	}
	return 3*stage + 1
}

func (b *builder) add(key, name string, cat simulate.Category, resource int, seconds float64, deps ...string) {
	b.keys[key] = len(b.tasks)
	b.tasks = append(b.tasks, simulate.Task{Name: name, Category: cat, Resource: resource, Duration: seconds})
	b.deps = append(b.deps, deps)
}

func (b *builder) run(ctx context.Context) (*simulate.Schedule, error) {
	for st := 0; st < b.s.PP; st++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for _, u := range oneFOneB(st, b.s.PP, b.s.Microbatches) {
			if u.forward {
				b.forward(st, u.micro)
			} else {
				b.backward(st, u.micro)
			}
		}
		b.update(st)
	}
	for i, ds := range b.deps {
		for _, k := range ds {
			if k == "" {
				continue
			}
			j, ok := b.keys[k]
			if !ok {
				return nil, fmt.Errorf("task %s waits on %s, which no task provides", b.tasks[i].Name, k)
			}
			b.tasks[i].Deps = append(b.tasks[i].Deps, j)
		}
	}
	return simulate.Run(ctx, b.resources, b.tasks)
}

type unit struct {
	forward bool
	micro   int
}

// oneFOneB is a stage's order of forward and backward micro-batches:
// pp−stage−1 forwards to fill the pipeline, then one forward and one
// backward in turn, then the remaining backwards.
func oneFOneB(stage, pp, m int) []unit {
	warm := min(pp-stage-1, m)
	var out []unit
	for j := 0; j < warm; j++ {
		out = append(out, unit{true, j})
	}
	for j := 0; j < m-warm; j++ {
		out = append(out, unit{true, warm + j}, unit{false, j})
	}
	for j := m - warm; j < m; j++ {
		out = append(out, unit{false, j})
	}
	return out
}

// launch adds the host's launch (t seconds) of operator i's task key on
// stage st, in program order on the host, and is its key; "" (no wait)
// where the cost model has no launch time.
func (b *builder) launch(st, i int, key string, t float64) string {
	if t <= 0 {
		return ""
	}
	b.add("launch "+key, "launch "+b.g.Ops[i].Name, simulate.Compute, 3*b.s.PP+st, t)
	return "launch " + key
}

func valueKey(v string, micro int) string { return fmt.Sprintf("value %s #%d", v, micro) }
func gradKey(v string, micro int) string  { return fmt.Sprintf("grad %s #%d", v, micro) }

func (b *builder) forward(st, j int) {
	for i, op := range b.g.Ops {
		if b.r.Stage[i] != st {
			continue
		}
		l := b.r.Layouts[i]
		var deps []string
		for _, v := range op.Inputs {
			if p, ok := b.g.Producer(v); ok {
				deps = append(deps, b.arrive(st, b.r.Stage[p], v, j))
			}
		}
		if l.GatherInputs {
			g := b.tpGroup(st)
			key := fmt.Sprintf("gather %s #%d", op.Name, j)
			b.add(key, "all-gather "+op.Name, simulate.Communication, b.link(st, g), b.o.Machine.AllGather(g, b.inputBytes(op)*b.micro), deps...)
			deps = []string{key}
		}
		fwd := fmt.Sprintf("fwd %s #%d", op.Name, j)
		b.add(fwd, op.Name, simulate.Compute, 3*st, b.r.Costs[i].Forward, append(deps, b.launch(st, i, fwd, b.r.Costs[i].Launch))...)
		done := fwd
		if l.ForwardAllReduce {
			g := b.tpGroup(st)
			done = fmt.Sprintf("tp all-reduce %s #%d", op.Name, j)
			b.add(done, "all-reduce "+op.Name, simulate.Communication, b.link(st, g), b.o.Machine.AllReduce(g, op.OutputBytes*b.micro), fwd)
		}
		for _, v := range op.Outputs {
			b.keys[valueKey(v, j)] = b.keys[done]
			b.sendForward(st, v, j)
		}
	}
}

// sendForward sends value v of micro-batch j, just made on stage st, to
// every later stage that reads it, on st's link in the order made.
func (b *builder) sendForward(st int, v string, j int) {
	for _, c := range b.g.Consumers(v) {
		to := b.r.Stage[c]
		key := fmt.Sprintf("send %s #%d to %d", v, j, to)
		if _, done := b.keys[key]; to == st || done {
			continue
		}
		b.add(key, "send "+v, simulate.Communication, b.link(st, cluster.Group{b.base(st), b.base(to)}),
			b.o.Machine.PointToPoint(b.base(st), b.base(to), b.g.ValueBytes(v)*b.micro), valueKey(v, j))
	}
}

// arrive is the key of value v, produced on stage from, as stage st sees
// it.
func (b *builder) arrive(st, from int, v string, j int) string {
	if from == st {
		return valueKey(v, j)
	}
	return fmt.Sprintf("send %s #%d to %d", v, j, st)
}

func (b *builder) inputBytes(op training.Op) float64 {
	var s float64
	for _, v := range op.Inputs {
		if _, ok := b.g.Producer(v); ok {
			s += b.g.ValueBytes(v)
		}
	}
	return s
}

func (b *builder) backward(st, j int) {
	last := j == b.s.Microbatches-1
	for i := len(b.g.Ops) - 1; i >= 0; i-- {
		op := b.g.Ops[i]
		if b.r.Stage[i] != st {
			continue
		}
		l := b.r.Layouts[i]
		deps := []string{fmt.Sprintf("fwd %s #%d", op.Name, j)}
		for _, v := range op.Outputs {
			for _, c := range b.g.Consumers(v) {
				if from := b.r.Stage[c]; from == st {
					deps = append(deps, gradKey(b.g.Ops[c].Name, j))
				} else {
					deps = append(deps, fmt.Sprintf("send grad %s #%d from %d", v, j, from))
				}
			}
		}
		bwd := fmt.Sprintf("bwd %s #%d", op.Name, j)
		b.add(bwd, op.Name+" (backward)", simulate.Compute, 3*st, b.r.Costs[i].Backward, append(deps, b.launch(st, i, bwd, b.r.Costs[i].BackwardLaunch))...)
		done := bwd
		if l.BackwardAllReduce {
			g := b.tpGroup(st)
			done = fmt.Sprintf("tp grad all-reduce %s #%d", op.Name, j)
			b.add(done, "all-reduce grad "+op.Name, simulate.Communication, b.link(st, g), b.o.Machine.AllReduce(g, b.inputBytes(op)*b.micro), bwd)
		}
		b.keys[gradKey(op.Name, j)] = b.keys[done]
		b.sendBackward(st, i, j)
		if last && op.ParamBytes > 0 && b.s.DP > 1 {
			g := b.dpGroup(st)
			b.add("dp "+op.Name, "all-reduce weight grads "+op.Name, simulate.Communication, b.link(st, g),
				b.o.Machine.AllReduce(g, op.ParamBytes*l.cut(b.s.TP)), bwd)
		}
	}
}

// sendBackward sends the gradients of op i's inputs made on earlier
// stages back to them, once the last reader on stage st (the first in
// graph order) has its backward done.
func (b *builder) sendBackward(st, i, j int) {
	for _, v := range b.g.Ops[i].Inputs {
		p, ok := b.g.Producer(v)
		if !ok || b.r.Stage[p] == st {
			continue
		}
		var deps []string
		first := true
		for _, c := range b.g.Consumers(v) {
			if b.r.Stage[c] == st {
				deps = append(deps, gradKey(b.g.Ops[c].Name, j))
				first = first && c >= i
			}
		}
		if !first {
			continue
		}
		to := b.r.Stage[p]
		b.add(fmt.Sprintf("send grad %s #%d from %d", v, j, st), "send grad "+v, simulate.Communication,
			b.link(st, cluster.Group{b.base(st), b.base(to)}), b.o.Machine.PointToPoint(b.base(st), b.base(to), b.g.ValueBytes(v)*b.micro), deps...)
	}
}

// update is Adam on the stage's share of the weights once their gradients
// are reduced: Adam as the profile measured it (fused or foreach), or the
// roofline of its traffic (costs.adam).
func (b *builder) update(st int) {
	var params float64
	deps := []string{}
	for i, op := range b.g.Ops {
		if b.r.Stage[i] != st || op.ParamBytes == 0 {
			continue
		}
		params += op.ParamBytes * b.r.Layouts[i].cut(b.s.TP)
		deps = append(deps, fmt.Sprintf("bwd %s #%d", op.Name, b.s.Microbatches-1))
		if b.s.DP > 1 {
			deps = append(deps, "dp "+op.Name)
		}
	}
	if params == 0 {
		return
	}
	t, src := b.c.adam(params/4, b.o.optimizer())
	if t > b.r.Optimizer.Forward {
		b.r.Optimizer = OpCost{Forward: t, Source: src}
	}
	b.add(fmt.Sprintf("adam %d", st), "optimizer step (Adam)", simulate.Compute, 3*st, t, deps...)
}

// slowest is the simulated step of the stage whose device finishes last,
// split into compute, exposed communication and idle time.
func (b *builder) slowest(s *simulate.Schedule) Time {
	var worst Time
	for st := 0; st < b.s.PP; st++ {
		bd := s.Breakdown(3 * st)
		t := Time{Step: s.Makespan, Compute: bd.Compute, ExposedCommunication: bd.ExposedCommunication, Idle: bd.Idle}
		if st == 0 || t.Idle < worst.Idle {
			worst = t
		}
	}
	return worst
}
