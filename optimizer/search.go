package optimizer

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	"rulebook/rewrite"
	"rulebook/rules"
)

// Options bound TASO's cost-based backtracking search (Algorithm 2).
type Options struct {
	// Alpha keeps graphs up to Alpha times the best cost in the queue, so
	// that the search can pass through slightly worse graphs (TASO: 1.05).
	Alpha float64
	// Budget is the most graphs taken from the queue.
	Budget int
	// Timeout bounds the search's wall-clock time.
	Timeout time.Duration
	Cost    CostModel
	// MemoryLimit, when positive, drops graphs whose estimated peak
	// memory (Graph.Memory) exceeds it, in bytes.
	MemoryLimit int64
	// Progress, if set, hears of every improvement.
	Progress func(Progress)
}

// DefaultOptions are TASO's α and bounds that keep each shared model
// under a minute on two cores.
var DefaultOptions = Options{Alpha: 1.05, Budget: 300, Timeout: 50 * time.Second, Cost: DefaultCPU}

// Progress reports the best cost found so far.
type Progress struct {
	Elapsed  time.Duration
	Explored int
	Best     float64
}

// Result is the outcome of a search.
type Result struct {
	Graph         *Graph
	Before, After float64 // modelled cost, milliseconds
	// Applied counts the rules used on the way to the best graph, by the
	// rule's index in the rule set.
	Applied  map[int]int
	Explored int // graphs taken from the queue
	Seen     int // distinct graphs generated
	Elapsed  time.Duration
	Stopped  string // "queue empty", "budget", "timeout"
	// Trace is the best cost over time: the start and every improvement.
	Trace []Progress
	// OverMemory counts the graphs dropped for the memory limit.
	OverMemory int
}

// candidate is a graph in the search with the rules that led to it.
type candidate struct {
	g       *Graph
	cost    float64
	applied []int
}

// Optimize searches for a cheaper equivalent graph by applying the rule
// set's rules in both directions (TASO Algorithm 2): the cheapest graph is
// expanded first, every rewrite whose result type-checks and is new enters
// the queue if it costs less than Alpha times the best so far.
func Optimize(ctx context.Context, g *Graph, rs *RuleSet, opt Options) (*Result, error) {
	start := time.Now()
	var rws []rewrite.Rewrite
	for i, r := range rs.Rules {
		rws = append(rws, rewrite.Both(r, i)...)
	}
	if opt.MemoryLimit > 0 && g.Memory() > opt.MemoryLimit {
		return nil, fmt.Errorf("optimizer: the model needs %d MiB, above the memory limit of %d MiB", g.Memory()>>20, opt.MemoryLimit>>20)
	}
	first := &candidate{g: g, cost: opt.Cost.Cost(g)}
	res := &Result{Before: first.cost, Trace: []Progress{{Best: first.cost}}}
	best := first
	seen := map[string]bool{rewrite.Key(&g.G): true}
	queue := &candidates{first}
	deadline := start.Add(opt.Timeout)
	for queue.Len() > 0 {
		switch {
		case res.Explored >= opt.Budget:
			res.Stopped = "budget"
		case time.Now().After(deadline):
			res.Stopped = "timeout"
		case ctx.Err() != nil:
			return nil, ctx.Err()
		}
		if res.Stopped != "" {
			break
		}
		cur := heap.Pop(queue).(*candidate)
		res.Explored++
		for _, next := range expand(cur, rws, seen) {
			if opt.MemoryLimit > 0 && next.g.Memory() > opt.MemoryLimit {
				res.OverMemory++
				continue
			}
			next.cost = opt.Cost.Cost(next.g)
			if next.cost < best.cost {
				best = next
				p := Progress{Elapsed: time.Since(start), Explored: res.Explored, Best: best.cost}
				res.Trace = append(res.Trace, p)
				if opt.Progress != nil {
					opt.Progress(p)
				}
			}
			if next.cost < opt.Alpha*best.cost {
				heap.Push(queue, next)
			}
		}
	}
	if res.Stopped == "" {
		res.Stopped = "queue empty"
	}
	res.Graph, res.After, res.Seen, res.Elapsed = best.g, best.cost, len(seen), time.Since(start)
	res.Applied = map[int]int{}
	for _, r := range best.applied {
		res.Applied[r]++
	}
	return res, nil
}

// expand returns the new graphs one rewrite away that type-check.
func expand(cur *candidate, rws []rewrite.Rewrite, seen map[string]bool) []*candidate {
	var out []*candidate
	rewrite.Neighbours(&cur.g.G, rws, func(rw *rewrite.Rewrite, _ *rewrite.Match, next *rules.Graph) bool {
		key := rewrite.Key(next)
		if seen[key] {
			return true
		}
		seen[key] = true
		g := cur.g.with(next)
		if err := g.Infer(); err != nil {
			return true // the rule does not fit these shapes here
		}
		out = append(out, &candidate{g: g, applied: append(append([]int(nil), cur.applied...), rw.Rule)})
		return true
	})
	return out
}

// with is the graph with its nodes and outputs replaced by a rewrite's.
func (g *Graph) with(next *rules.Graph) *Graph {
	h := *g
	h.G = *next
	h.Shapes = nil
	return &h
}

type candidates []*candidate

func (c candidates) Len() int           { return len(c) }
func (c candidates) Less(i, j int) bool { return c[i].cost < c[j].cost }
func (c candidates) Swap(i, j int)      { c[i], c[j] = c[j], c[i] }
func (c *candidates) Push(x any)        { *c = append(*c, x.(*candidate)) }
func (c *candidates) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}
