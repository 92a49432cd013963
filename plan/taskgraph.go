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
// data-parallel gradient all-reduces (in buckets, each issued when its last
// gradient is ready, so they overlap the rest of the backward pass) and the
// optimizer update. Every device of a stage runs the same tasks, so one
// stands for all; but each collective is priced for the slowest of the
// stage's groups, where their devices are.
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
	// actMicro scales an activation's fp32 size (as training counts it) to
	// one micro-batch's message in the precision's element size: 16-bit
	// mixed precision sends activations and their gradients in 2 bytes.
	actMicro float64

	resources []simulate.Resource
	tasks     []simulate.Task
	keys      map[string]int
	deps      [][]string

	tp, dp  []groups          // per stage
	sends   map[[2]int][2]int // stage pair → the device pair priced
	buckets [][]string        // per stage, the keys of its gradient all-reduces
}

// groups is every distinct placement of one kind of a stage's groups (its
// tensor-parallel groups, one per replica, or its data-parallel groups,
// one per tensor-parallel rank), and whether any of them crosses nodes.
type groups struct {
	places []cluster.Placement
	spans  bool
}

func newBuilder(g *training.Graph, s Strategy, o Options, r *Result, c *costs) *builder {
	b := &builder{g: g, s: s, o: o, r: r, c: c, keys: map[string]int{},
		micro: 1 / float64(s.DP*s.Microbatches), sends: map[[2]int][2]int{}, buckets: make([][]string, s.PP)}
	b.actMicro = b.micro * c.elem / 4
	r.Costs = c.all(g, r.Layouts, s.TP, b.micro)
	if r.tables != nil {
		r.tables.priceLookups(g, c, r.Costs, s.Microbatches)
	}
	for st := 0; st < s.PP; st++ {
		b.tp = append(b.tp, b.tpGroups(st))
		b.dp = append(b.dp, b.dpGroups(st))
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

// tpGroups are a stage's tensor-parallel groups: replica r holds devices
// base + r·TP + i.
func (b *builder) tpGroups(stage int) groups {
	return b.place(stage, b.s.DP, b.s.TP, func(r, i int) int { return r*b.s.TP + i })
}

// dpGroups are a stage's data-parallel groups: tensor-parallel rank t
// holds devices base + t + i·TP.
func (b *builder) dpGroups(stage int) groups {
	return b.place(stage, b.s.TP, b.s.DP, func(t, i int) int { return t + i*b.s.TP })
}

// place is the distinct placements of count groups of size devices, device
// i of group k being base + offset(k, i).
func (b *builder) place(stage, count, size int, offset func(k, i int) int) groups {
	var out groups
	seen := map[cluster.Placement]bool{}
	g := make(cluster.Group, size)
	for k := 0; k < count; k++ {
		for i := range g {
			g[i] = b.base(stage) + offset(k, i)
		}
		p := b.o.Machine.Place(g)
		if !seen[p] {
			seen[p] = true
			out.places = append(out.places, p)
			out.spans = out.spans || p.Spans()
		}
	}
	return out
}

// collective is the slowest of a stage's groups under cost, and the link
// resource it runs on: the network when any group crosses nodes.
func (b *builder) collective(stage int, gs groups, cost func(cluster.Placement) float64) (resource int, seconds float64) {
	seconds = gs.slowest(cost)
	if gs.spans {
		return 3*stage + 2, seconds
	}
	return 3*stage + 1, seconds
}

// slowest is the longest any of the groups takes under cost.
func (gs groups) slowest(cost func(cluster.Placement) float64) float64 {
	var seconds float64
	for _, p := range gs.places {
		seconds = max(seconds, cost(p))
	}
	return seconds
}

// send is the resource and time of sending bytes from stage st to stage
// to: every device of st sends its share to its counterpart in to at
// once, so the slowest pair (one that crosses nodes, if any does) is
// priced.
func (b *builder) send(st, to int, bytes float64) (resource int, seconds float64) {
	pair, ok := b.sends[[2]int{st, to}]
	if !ok {
		per := b.o.Machine.DevicesPerNode
		pair = [2]int{b.base(st), b.base(to)}
		for k := 0; k < b.s.DP*b.s.TP; k++ {
			if from, into := b.base(st)+k, b.base(to)+k; from/per != into/per {
				pair = [2]int{from, into}
				break
			}
		}
		b.sends[[2]int{st, to}] = pair
	}
	resource = 3*st + 1
	if pair[0]/b.o.Machine.DevicesPerNode != pair[1]/b.o.Machine.DevicesPerNode {
		resource = 3*st + 2
	}
	return resource, b.o.Machine.PointToPoint(pair[0], pair[1], bytes)
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

// launch adds the host's launch (t seconds) of operator i's next task on
// stage st, in program order on the host, and is its task's index; −1
// where the cost model has no launch time. It has no key: only the task
// it launches waits for it (waitFor), which keeps a step of millions of
// tasks from a map entry each.
func (b *builder) launch(st, i int, t float64) int {
	if t <= 0 {
		return -1
	}
	b.tasks = append(b.tasks, simulate.Task{Name: "launch " + b.g.Ops[i].Name, Category: simulate.Compute, Resource: 3*b.s.PP + st, Duration: t})
	b.deps = append(b.deps, nil)
	return len(b.tasks) - 1
}

// waitFor makes the task just added wait for task j as well (none if j
// is −1).
func (b *builder) waitFor(j int) {
	if j >= 0 {
		last := len(b.tasks) - 1
		b.tasks[last].Deps = append(b.tasks[last].Deps, j)
	}
}

func valueKey(v string, micro int) string { return fmt.Sprintf("value %s #%d", v, micro) }
func gradKey(v string, micro int) string  { return fmt.Sprintf("grad %s #%d", v, micro) }

func (b *builder) forward(st, j int) {
	if b.r.tables != nil {
		b.sendIndices(j)
	}
	for i, op := range b.g.Ops {
		if b.r.Stage[i] != st {
			continue
		}
		l := b.r.Layouts[i]
		var deps []string
		if b.r.isLookup(i) {
			deps = append(deps, idsKey(j))
		}
		for _, v := range op.Inputs {
			if p, ok := b.g.Producer(v); ok {
				deps = append(deps, b.arrive(st, b.r.Stage[p], v, j))
			}
		}
		if l.GatherInputs {
			key := fmt.Sprintf("gather %s #%d", op.Name, j)
			res, t := b.collective(st, b.tp[st], func(p cluster.Placement) float64 {
				return b.o.Machine.AllGatherAt(p, b.inputBytes(op)*b.actMicro)
			})
			b.add(key, "all-gather "+op.Name, simulate.Communication, res, t, deps...)
			deps = []string{key}
		}
		deps = append(deps, b.gatherWeights(st, i, fmt.Sprintf("#%d", j)))
		fwd := fmt.Sprintf("fwd %s #%d", op.Name, j)
		t, launch := b.r.Costs[i].Forward, b.r.Costs[i].Launch
		if j == 0 {
			// autocast's 16-bit copy of the weights, kept for the step
			t, launch = t+b.r.Costs[i].Cast, launch+b.r.Costs[i].CastLaunch
		}
		host := b.launch(st, i, launch)
		b.add(fwd, op.Name, simulate.Compute, 3*st, t, deps...)
		b.waitFor(host)
		done := fwd
		if l.ForwardAllReduce {
			done = fmt.Sprintf("tp all-reduce %s #%d", op.Name, j)
			res, t := b.collective(st, b.tp[st], func(p cluster.Placement) float64 {
				return b.o.Machine.AllReduceAt(p, op.OutputBytes*b.actMicro)
			})
			b.add(done, "all-reduce "+op.Name, simulate.Communication, res, t, fwd)
		}
		for _, v := range op.Outputs {
			b.keys[valueKey(v, j)] = b.keys[done]
			b.sendForward(st, v, j)
		}
	}
	if b.r.tables != nil {
		b.sendRows(j)
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
		res, t := b.send(st, to, b.g.ValueBytes(v)*b.actMicro)
		b.add(key, "send "+v, simulate.Communication, res, t, valueKey(v, j))
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

func (b *builder) inputBytes(op training.Op) float64 { return inputBytes(b.g, op) }

func (b *builder) backward(st, j int) {
	last := j == b.s.Microbatches-1
	var bk bucket
	for i := len(b.g.Ops) - 1; i >= 0; i-- {
		op := b.g.Ops[i]
		if b.r.Stage[i] != st {
			continue
		}
		l := b.r.Layouts[i]
		deps := []string{fmt.Sprintf("fwd %s #%d", op.Name, j)}
		if b.r.isLookup(i) {
			// the rows' gradients come back from every replica
			b.sendRowGrads(j)
			deps = append(deps, gradsKey(j))
		}
		for _, v := range op.Outputs {
			if b.r.isLookup(i) {
				break
			}
			for _, c := range b.g.Consumers(v) {
				if from := b.r.Stage[c]; from == st {
					deps = append(deps, gradKey(b.g.Ops[c].Name, j))
				} else {
					deps = append(deps, fmt.Sprintf("send grad %s #%d from %d", v, j, from))
				}
			}
		}
		deps = append(deps, b.gatherWeights(st, i, fmt.Sprintf("#%d backward", j)))
		bwd := fmt.Sprintf("bwd %s #%d", op.Name, j)
		again, againLaunch := b.recompute(i)
		host := b.launch(st, i, b.r.Costs[i].BackwardLaunch+againLaunch)
		b.add(bwd, op.Name+" (backward)", simulate.Compute, 3*st, b.r.Costs[i].Backward+again, deps...)
		b.waitFor(host)
		done := bwd
		if l.BackwardAllReduce {
			done = fmt.Sprintf("tp grad all-reduce %s #%d", op.Name, j)
			res, t := b.collective(st, b.tp[st], func(p cluster.Placement) float64 {
				return b.o.Machine.AllReduceAt(p, b.inputBytes(op)*b.actMicro)
			})
			b.add(done, "all-reduce grad "+op.Name, simulate.Communication, res, t, bwd)
		}
		b.keys[gradKey(op.Name, j)] = b.keys[done]
		b.sendBackward(st, i, j)
		if op.ParamBytes > 0 && b.s.DP > 1 && (last || b.s.ZeRO >= 2) && !b.r.isLookup(i) {
			bk.bytes += op.ParamBytes * l.cut(b.s.TP)
			bk.ops = append(bk.ops, op.Name)
			bk.deps = append(bk.deps, bwd)
			if bk.bytes >= b.bucketCap(st) {
				b.reduceBucket(st, &bk)
			}
		}
	}
	if len(bk.ops) > 0 {
		b.reduceBucket(st, &bk)
	}
}

// bucket is weight gradients that one data-parallel all-reduce carries, as
// PyTorch DDP groups them: in the order backward makes them (the reverse of
// the forward), closed once it holds Options.BucketBytes (the first one
// at 1 MiB).
type bucket struct {
	bytes float64
	ops   []string // weights' operators, in the order filled
	deps  []string // their backward tasks
}

// firstBucketBytes is PyTorch DDP's first bucket (1 MiB), smaller than the
// rest so that the last layers' gradients start reducing early.
const firstBucketBytes = 1 << 20

// bucketCap is the size that closes the stage's next bucket.
func (b *builder) bucketCap(st int) float64 {
	if len(b.buckets[st]) == 0 {
		return min(b.o.BucketBytes, firstBucketBytes)
	}
	return b.o.BucketBytes
}

// reduceBucket issues bk's reduction over the stage's data-parallel
// groups once its last gradient is ready, and empties it: an all-reduce,
// or under ZeRO a reduce-scatter, since each replica keeps only its
// shard's sum. ZeRO 2 and 3 hold no whole gradient to accumulate into, so
// backward reduces after every micro-batch; the others once, after the
// last.
func (b *builder) reduceBucket(st int, bk *bucket) {
	key := fmt.Sprintf("dp bucket %d of stage %d", len(b.buckets[st]), st)
	verb, cost := "all-reduce", b.o.Machine.AllReduceAt
	if b.s.ZeRO > 0 {
		verb, cost = "reduce-scatter", b.o.Machine.ReduceScatterAt
	}
	name := verb + " weight grads " + bk.ops[0]
	if n := len(bk.ops); n > 1 {
		name = fmt.Sprintf("%s weight grads (bucket of %d: %s … %s)", verb, n, bk.ops[0], bk.ops[n-1])
	}
	bytes := bk.bytes
	res, t := b.collective(st, b.dp[st], func(p cluster.Placement) float64 { return cost(p, bytes) })
	b.add(key, name, simulate.Communication, res, t, bk.deps...)
	b.buckets[st] = append(b.buckets[st], key)
	*bk = bucket{}
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
		res, t := b.send(st, b.r.Stage[p], b.g.ValueBytes(v)*b.actMicro)
		b.add(fmt.Sprintf("send grad %s #%d from %d", v, j, st), "send grad "+v, simulate.Communication, res, t, deps...)
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
		params += op.ParamBytes * b.r.weightShare(i, b.s.TP)
		deps = append(deps, fmt.Sprintf("bwd %s #%d", op.Name, b.s.Microbatches-1))
	}
	deps = append(deps, b.buckets[st]...)
	if params == 0 {
		return
	}
	if b.s.ZeRO > 0 {
		params /= float64(b.s.DP) // each replica updates its shard
	}
	t, src := b.c.adam(params/4, b.o.optimizer())
	if t > b.r.Optimizer.Forward {
		b.r.Optimizer = OpCost{Forward: t, Source: src}
	}
	adam := fmt.Sprintf("adam %d", st)
	b.add(adam, "optimizer step (Adam)", simulate.Compute, 3*st, t, deps...)
	if b.s.ZeRO == 1 || b.s.ZeRO == 2 {
		whole := params * float64(b.s.DP)
		res, t := b.collective(st, b.dp[st], func(p cluster.Placement) float64 { return b.o.Machine.AllGatherAt(p, whole) })
		b.add(fmt.Sprintf("gather updated weights %d", st), "all-gather updated weights", simulate.Communication, res, t, adam)
	}
}

// slowest is the simulated step of the stage whose device finishes last,
// split into compute, exposed communication and idle time.
func (b *builder) slowest(s *simulate.Schedule) Time {
	var worst Time
	rs := make([]int, b.s.PP)
	for st := range rs {
		rs[st] = 3 * st
	}
	for st, bd := range s.Breakdowns(rs) {
		t := Time{Step: s.Makespan, Compute: bd.Compute, ExposedCommunication: bd.ExposedCommunication, Idle: bd.Idle}
		if st == 0 || t.Idle < worst.Idle {
			worst = t
		}
	}
	return worst
}
