package optimizer

import (
	"container/heap"
	"context"
	"fmt"
	"slices"
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
	// Progress, if set, hears after each expansion how far the search is.
	Progress func(Progress)
}

// DefaultOptions are TASO's α and bounds that keep each shared model
// under a minute on two cores.
var DefaultOptions = Options{Alpha: 1.05, Budget: 300, Timeout: 45 * time.Second, Cost: DefaultCPU}

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

// candidate is a graph in the search. Queued candidates hold only how to
// rebuild their graph (the parent, the rewrite and its match), since most
// are never expanded: holding every graph took gigabytes.
type candidate struct {
	g    *Graph // nil until the candidate is expanded or best
	cost float64
	// expanded candidates keep their graph: their children rebuild from it.
	expanded bool
	parent   *candidate
	rw       *rewrite.Rewrite
	match    rewrite.Match
}

// graph rebuilds the candidate's graph from its parent's, which is kept
// while a child needs it.
func (c *candidate) graph() (*Graph, error) {
	if c.g != nil {
		return c.g, nil
	}
	parent, err := c.parent.graph()
	if err != nil {
		return nil, err
	}
	next, err := rewrite.Apply(&parent.G, c.rw.From, c.rw.To, &c.match)
	if err != nil {
		return nil, fmt.Errorf("optimizer: rebuild a queued graph: %w", err)
	}
	g := parent.with(next)
	if err := g.Infer(); err != nil {
		return nil, fmt.Errorf("optimizer: rebuild a queued graph: %w", err)
	}
	return g, nil
}

// applied counts the rewrites on the way from the start, by variant.
func (c *candidate) applied() map[int]int {
	out := map[int]int{}
	for ; c.parent != nil; c = c.parent {
		out[c.rw.Rule]++
	}
	return out
}

// Optimize searches for a cheaper equivalent graph by applying the rule
// set's rules in both directions (TASO Algorithm 2): the cheapest graph is
// expanded first, every rewrite whose result type-checks and is new enters
// the queue if it costs less than Alpha times the best so far.
func Optimize(ctx context.Context, g *Graph, rs *RuleSet, opt Options) (*Result, error) {
	start := time.Now()
	vs, rws := rs.variants()
	if opt.MemoryLimit > 0 && g.Memory() > opt.MemoryLimit {
		return nil, fmt.Errorf("optimizer: the model needs %d MiB, above the memory limit of %d MiB", g.Memory()>>20, opt.MemoryLimit>>20)
	}
	first := &candidate{g: g, cost: opt.Cost.Cost(g)}
	res := &Result{Before: first.cost, Trace: []Progress{{Best: first.cost}}}
	best := first
	seen := map[string]bool{rewrite.CommutativeKey(&g.G): true}
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
		g, err := cur.graph()
		if err != nil {
			return nil, err
		}
		cur.g, cur.expanded = g, true
		res.Explored++
		expand(cur, vs, rws, seen, func(next *candidate) {
			if opt.MemoryLimit > 0 && next.g.Memory() > opt.MemoryLimit {
				res.OverMemory++
				return
			}
			next.cost = opt.Cost.Cost(next.g)
			if next.cost < best.cost {
				if !best.expanded {
					best.g = nil // rebuilt if it is ever expanded
				}
				best = next
				res.Trace = append(res.Trace, Progress{Elapsed: time.Since(start), Explored: res.Explored, Best: best.cost})
			}
			if next.cost < opt.Alpha*best.cost {
				if next != best {
					next.g = nil
				}
				heap.Push(queue, next)
			}
		})
		if opt.Progress != nil {
			opt.Progress(Progress{Elapsed: time.Since(start), Explored: res.Explored, Best: best.cost})
		}
	}
	if res.Stopped == "" {
		res.Stopped = "queue empty"
	}
	res.Graph, res.After, res.Seen, res.Elapsed = best.g, best.cost, len(seen), time.Since(start)
	res.Applied = map[int]int{}
	for v, n := range best.applied() {
		res.Applied[vs[v].rule] += n
	}
	return res, nil
}

// expand hands consider the new graphs one rewrite away that type-check.
func expand(cur *candidate, vs []variant, rws []rewrite.Rewrite, seen map[string]bool, consider func(*candidate)) {
	rewrite.Neighbours(&cur.g.G, rws, func(rw *rewrite.Rewrite, m *rewrite.Match, next *rules.Graph) bool {
		if !cur.g.fitsRanks(&vs[rw.Rule], m) {
			return true // proved for other ranks
		}
		key := rewrite.CommutativeKey(next)
		if seen[key] {
			return true
		}
		seen[key] = true
		g := cur.g.with(next)
		if err := g.Infer(); err != nil {
			return true // the rule does not fit these shapes here
		}
		consider(&candidate{g: g, parent: cur, rw: rw, match: cloneMatch(m)})
		return true
	})
}

func cloneMatch(m *rewrite.Match) rewrite.Match {
	return rewrite.Match{Nodes: slices.Clone(m.Nodes), Inputs: slices.Clone(m.Inputs), Bound: slices.Clone(m.Bound)}
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
