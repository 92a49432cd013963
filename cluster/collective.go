package cluster

// Group is a set of device numbers taking part in a collective.
type Group []int

// link is the bottleneck a collective over g sees: the intra-node link
// when g is within one node; otherwise the network, whose bandwidth each
// node shares among its members of g (a ring crossing nodes moves every
// member's share through the node's interfaces at once).
func (m Machine) link(g Group) Link {
	perNode := map[int]int{}
	for _, d := range g {
		perNode[d/m.DevicesPerNode]++
	}
	if len(perNode) <= 1 {
		return m.IntraNode
	}
	most := 0
	for _, n := range perNode {
		most = max(most, n)
	}
	return Link{Bandwidth: m.InterNode.Bandwidth / float64(most), Latency: m.InterNode.Latency}
}

// Collective costs, in seconds, for S bytes per device over n devices on
// link bandwidth B and latency α. A ring takes n−1 steps per phase, each
// paying α: all-reduce is 2(n−1)·α + 2(n−1)/n·S/B (reduce-scatter then
// all-gather; DisCo §4.2), all-gather and reduce-scatter (n−1)·α +
// (n−1)/n·S/B with S the whole gathered tensor, all-to-all (n−1)·α +
// (n−1)/n·S/B with S what each device holds. One device costs nothing.

// AllReduce is a ring all-reduce of bytes on every member of g.
func (m Machine) AllReduce(g Group, bytes float64) float64 {
	return m.ring(g, bytes, 2)
}

// AllGather gathers a tensor of bytes in total from equal pieces.
func (m Machine) AllGather(g Group, bytes float64) float64 { return m.ring(g, bytes, 1) }

// ReduceScatter reduces a tensor of bytes into equal pieces, one per member.
func (m Machine) ReduceScatter(g Group, bytes float64) float64 { return m.ring(g, bytes, 1) }

// AllToAll sends each member's bytes in equal parts to every member.
func (m Machine) AllToAll(g Group, bytes float64) float64 { return m.ring(g, bytes, 1) }

// PointToPoint sends bytes from device a to device b.
func (m Machine) PointToPoint(a, b int, bytes float64) float64 {
	if a == b {
		return 0
	}
	l := m.link(Group{a, b})
	return l.Latency + bytes/l.Bandwidth
}

func (m Machine) ring(g Group, bytes float64, phases int) float64 {
	n := float64(len(g))
	if n <= 1 {
		return 0
	}
	l := m.link(g)
	return float64(phases) * ((n-1)*l.Latency + (n-1)/n*bytes/l.Bandwidth)
}

// BusBandwidth is NCCL's bus bandwidth of an all-reduce that took seconds
// on bytes over n devices: the algorithm bandwidth S/t times 2(n−1)/n,
// which approaches the link bandwidth for large messages.
func BusBandwidth(n int, bytes, seconds float64) float64 {
	return bytes / seconds * 2 * float64(n-1) / float64(n)
}
