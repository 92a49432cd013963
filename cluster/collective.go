package cluster

import (
	"math"
	"slices"
)

// Group is a set of device numbers taking part in a collective.
type Group []int

// Placement is where a group's devices are: how many there are, how many
// nodes they span, and the fewest and most of them on one node. A
// collective's cost depends on nothing else.
type Placement struct {
	Members, Nodes, Least, Most int
}

// Place is g's placement on the machine.
func (m Machine) Place(g Group) Placement {
	if len(g) == 0 {
		return Placement{}
	}
	if !slices.IsSorted(g) {
		g = slices.Sorted(slices.Values(g))
	}
	// devices are numbered node by node, so a sorted group's members on one
	// node are a run
	p := Placement{Members: len(g), Least: len(g)}
	run := 0
	for i, d := range g {
		run++
		if i+1 == len(g) || g[i+1]/m.DevicesPerNode != d/m.DevicesPerNode {
			p.Nodes++
			p.Least, p.Most = min(p.Least, run), max(p.Most, run)
			run = 0
		}
	}
	return p
}

// Spans reports whether the placement crosses nodes, so that its
// collectives use the network.
func (p Placement) Spans() bool { return p.Nodes > 1 }

// Collectives as NCCL runs them (docs/planner.md, "Collectives"). For S
// bytes per device over a group of n devices on N nodes, with c the fewest
// members on one node, c' the most, D devices per node, B_i and α_i the
// intra-node link, B_n and α_n the node's network:
//
//   - A group within one node runs a ring over the intra-node link: B = B_i.
//   - A group spanning nodes runs c rings at once, each carrying S/c and
//     crossing every node once, through one NIC per member: NICs are
//     attached to devices, so the group has c/D of the node's network, and
//     chunks flow through NVLink and NIC hops at the same time. The ring's
//     bus bandwidth is the slower of the two: B = min(B_i, c·B_n/D). With
//     the whole node in the group it approaches the node's network
//     bandwidth, as nccl-tests measure.
//   - A ring phase takes n−1 steps. Spanning nodes, min(N, n−1) of them
//     cross the network and pay α_n; the others pay α_i.
//   - Ring all-reduce (reduce-scatter, then all-gather):
//     2·(phase latency) + 2(n−1)/n·S/B.
//   - Tree all-reduce (hierarchical: a chain within each node, a binary
//     tree between nodes, reduce up and broadcast down):
//     2·((c'−1)·α_i + ⌈log₂N⌉·α_n) + 2·S/B. Its latency grows with log N,
//     but each byte crosses every link twice.
//   - AllReduce takes the cheaper of the two, as NCCL's tuner does: the
//     tree for small messages over many nodes, the ring otherwise.
//   - All-gather and reduce-scatter (S the whole tensor) are one ring
//     phase: (phase latency) + (n−1)/n·S/B.
//   - All-to-all sends (n−1)/n of each member's S to the others; of it,
//     (n−c')/n leaves the node through the member's own NIC share B_n/D
//     (an all-to-all cannot pool NICs), and the rest goes over B_i. The two
//     run at once: (phase latency) + max((c'−1)/n·S/B_i, (n−c')/n·S·D/B_n).
//   - Point to point within a node is α_i + S/B_i; between nodes α_n +
//     S·D/B_n, one device's share of its node's NICs, since every device
//     of a pipeline stage sends at once.
//
// One device costs nothing.

// AllReduce is an all-reduce of bytes on every member of g, by ring or by
// tree, whichever is cheaper.
func (m Machine) AllReduce(g Group, bytes float64) float64 {
	return m.AllReduceAt(m.Place(g), bytes)
}

// AllReduceAt is AllReduce for a group placed as p.
func (m Machine) AllReduceAt(p Placement, bytes float64) float64 {
	if p.Members <= 1 {
		return 0
	}
	return min(m.ringAllReduce(p, bytes), m.treeAllReduce(p, bytes))
}

// AllGather gathers a tensor of bytes in total from equal pieces.
func (m Machine) AllGather(g Group, bytes float64) float64 {
	return m.AllGatherAt(m.Place(g), bytes)
}

// AllGatherAt is AllGather for a group placed as p.
func (m Machine) AllGatherAt(p Placement, bytes float64) float64 {
	if p.Members <= 1 {
		return 0
	}
	n := float64(p.Members)
	return m.phaseLatency(p) + (n-1)/n*bytes/m.ringBandwidth(p)
}

// ReduceScatter reduces a tensor of bytes into equal pieces, one per
// member; it costs what an all-gather of the same tensor costs.
func (m Machine) ReduceScatter(g Group, bytes float64) float64 {
	return m.ReduceScatterAt(m.Place(g), bytes)
}

// ReduceScatterAt is ReduceScatter for a group placed as p: the ring of
// an all-gather, run with additions.
func (m Machine) ReduceScatterAt(p Placement, bytes float64) float64 {
	return m.AllGatherAt(p, bytes)
}

// AllToAll sends each member's bytes in equal parts to every member.
func (m Machine) AllToAll(g Group, bytes float64) float64 {
	p := m.Place(g)
	if p.Members <= 1 {
		return 0
	}
	n, most := float64(p.Members), float64(p.Most)
	inside := (most - 1) / n * bytes / m.IntraNode.Bandwidth
	if !p.Spans() {
		return m.phaseLatency(p) + inside
	}
	outside := (n - most) / n * bytes / m.deviceNetwork()
	return m.phaseLatency(p) + max(inside, outside)
}

// PointToPoint sends bytes from device a to device b.
func (m Machine) PointToPoint(a, b int, bytes float64) float64 {
	if a == b {
		return 0
	}
	if a/m.DevicesPerNode == b/m.DevicesPerNode {
		return m.IntraNode.Latency + bytes/m.IntraNode.Bandwidth
	}
	return m.InterNode.Latency + bytes/m.deviceNetwork()
}

// deviceNetwork is one device's share of its node's network: NCCL binds
// each device to its nearest NIC.
func (m Machine) deviceNetwork() float64 {
	return m.InterNode.Bandwidth / float64(m.DevicesPerNode)
}

// ringBandwidth is the bus bandwidth of the group's rings: the intra-node
// link within a node; across nodes the slower of that link and the
// members' share of the network on the node with fewest members.
func (m Machine) ringBandwidth(p Placement) float64 {
	if !p.Spans() {
		return m.IntraNode.Bandwidth
	}
	return min(m.IntraNode.Bandwidth, float64(p.Least)*m.deviceNetwork())
}

// phaseLatency is one ring phase's n−1 steps, the network's latency paid
// only on the steps that cross nodes.
func (m Machine) phaseLatency(p Placement) float64 {
	steps := p.Members - 1
	inter := 0
	if p.Spans() {
		inter = min(p.Nodes, steps)
	}
	return float64(inter)*m.InterNode.Latency + float64(steps-inter)*m.IntraNode.Latency
}

func (m Machine) ringAllReduce(p Placement, bytes float64) float64 {
	n := float64(p.Members)
	return 2*m.phaseLatency(p) + 2*(n-1)/n*bytes/m.ringBandwidth(p)
}

func (m Machine) treeAllReduce(p Placement, bytes float64) float64 {
	depth := math.Ceil(math.Log2(float64(p.Nodes)))
	latency := float64(p.Most-1)*m.IntraNode.Latency + depth*m.InterNode.Latency
	return 2*latency + 2*bytes/m.ringBandwidth(p)
}

// BusBandwidth is NCCL's bus bandwidth of an all-reduce that took seconds
// on bytes over n devices: the algorithm bandwidth S/t times 2(n−1)/n,
// which approaches the link bandwidth for large messages.
func BusBandwidth(n int, bytes, seconds float64) float64 {
	return bytes / seconds * 2 * float64(n-1) / float64(n)
}
