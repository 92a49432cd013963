package optimizer

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"rulebook/rewrite"
	"rulebook/rules"
	"rulebook/version"
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
	// MinGain is the smallest improvement, as a fraction of the best
	// cost, that makes a graph the new best: measured costs are noisy,
	// and a gain within the noise is no gain. Smaller gains still queue,
	// so that several of them add up.
	MinGain float64
	// Progress, if set, hears after each expansion how far the search is.
	Progress func(Progress)
	// ConfirmRounds is how many rounds a cost model that can (Measured)
	// times the best graph's changes against the start's, side by side,
	// before the search keeps them (see Confirmer); 0 skips this.
	ConfirmRounds int
	// Phase, if set, hears when the search ("search") and the
	// confirmation of its gain ("confirmation") begin; Job adds its own
	// phases ("comparison", "writing").
	Phase func(name string)
	// expanded, if set, hears each graph the search expands, with its
	// key (rewrite.CommutativeKey): tests check that none repeats.
	expanded func(g *Graph, key string)
}

// Confirmer is a cost model whose prices drift, so that the search's
// gain must be measured again: Confirm returns the time of the part of
// a that differs from b, and of the part of b that differs from a, timed
// together in rounds.
type Confirmer interface {
	Confirm(ctx context.Context, a, b *Graph, rounds int) (aMs, bMs float64, err error)
}

// Confirmation is the best graph's gain timed again side by side.
type Confirmation struct {
	Rounds int
	// Before and After are the times of the operator configurations in
	// which the start and the best graph differ, in milliseconds: those
	// the rewrite removed, and those it added.
	Before, After float64
	// Held says whether the gain, Before − After, exceeds MinGain of the
	// start's cost as the search priced it; when it does not, or when the
	// configurations could not be timed (Err), the search returns the
	// start graph.
	Held bool
	Err  string
}

// DefaultOptions are TASO's α and bounds that keep each shared model
// under a minute on two cores.
func DefaultOptions() Options {
	return Options{Alpha: 1.05, Budget: 300, Timeout: 45 * time.Second, Cost: DefaultCPU(), ConfirmRounds: 11}
}

// StopReason says why a search stopped. Its text is what reports and the
// store keep.
type StopReason string

const (
	// Searching is a search that has not stopped yet.
	Searching StopReason = ""
	// QueueEmpty: every graph within Alpha of the best was expanded.
	QueueEmpty StopReason = "queue empty"
	// BudgetSpent: Budget graphs were expanded.
	BudgetSpent StopReason = "budget"
	// TimedOut: the search ran past Timeout.
	TimedOut StopReason = "timeout"
	// Interrupted: the context was cancelled (Ctrl-C); the result is the
	// best graph found so far.
	Interrupted StopReason = "interrupted"
)

// Phases of an optimization, as Options.Phase hears them.
const (
	PhaseSearch       = "search"
	PhaseConfirmation = "confirmation"
	PhaseComparison   = "comparison"
	PhaseWriting      = "writing"
)

// tieTolerance is the relative difference under which two costs are the
// same: costs are exact sums (see sumPrices), but prices are rounded,
// and two ways of computing the same thing may differ in their last
// digits; such a difference is no improvement.
const tieTolerance = 1e-9

// progressEvery is how often a long expansion reports progress.
const progressEvery = 200 * time.Millisecond

// haltEvery is how many matches an expansion tries between looks at the
// clock and the context: well under a millisecond of work.
const haltEvery = 16

func (r StopReason) String() string { return string(r) }

// Progress reports the best cost found so far.
type Progress struct {
	Elapsed  time.Duration
	Explored int
	Best     float64
	// Fraction is how much of the search's bounds is spent: the larger of
	// the graphs expanded against Budget and the time against Timeout,
	// since whichever runs out first ends the search; 1 once it stopped.
	Fraction float64
}

// Describe says how far a search under opt is, for a progress bar;
// costModel names the cost model ("analytic" or "measured").
func (p Progress) Describe(opt Options, costModel string) string {
	return fmt.Sprintf("search %.1fs of %s, %d of %d graphs, best %.3f %s", p.Elapsed.Seconds(), opt.Timeout, p.Explored, opt.Budget, p.Best, CostUnit(costModel))
}

// Result is the outcome of a search.
type Result struct {
	Graph         *Graph
	Before, After float64 // modelled cost, milliseconds
	// Applied counts the rules used on the way to the best graph, by the
	// rule's index in the rule set; Reversed counts those of them used
	// right to left, from the rule's target to its source.
	Applied  map[int]int
	Reversed map[int]int
	Explored int // graphs taken from the queue and expanded
	// Seen counts the graphs queued: those that type-check and were,
	// when generated, within Alpha of the best cost (see expand); one
	// generated again is queued again. Repeats counts the queued graphs
	// that, taken from the queue, repeat one expanded already, and were
	// dropped (see step). Generated counts every neighbour generated.
	Seen, Repeats, Generated int
	Elapsed                  time.Duration
	Stopped                  StopReason
	// Trace is the best cost over time: the start, every improvement, and
	// the confirmed cost when the search's gain was timed again.
	Trace []Progress
	// OverMemory counts the graphs dropped for the memory limit.
	OverMemory int
	// Unshaped counts the rules left out because they record no shapes
	// to tell at which ranks they hold (see variants).
	Unshaped int
	// BeforeByOperator and AfterByOperator split Before and After by
	// operator (see ByOperator).
	BeforeByOperator, AfterByOperator map[string]OperatorCost
	// Confirmed is the gain timed again, when the cost model is a
	// Confirmer and the search found a cheaper graph.
	Confirmed *Confirmation
}

// candidate is a graph in the search. Queued candidates hold only how to
// rebuild their graph (the parent, the rewrite and its match), since most
// are never expanded: holding every graph took gigabytes.
type candidate struct {
	g    *Graph // nil until the candidate is expanded or best
	cost float64
	// seq numbers the queued candidates in the order queued: of two that
	// cost the same, the first queued is expanded first.
	seq int
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

// directedUse is a variant applied in one direction.
type directedUse struct {
	variant  int
	reversed bool
}

// applied counts the rewrites on the way from the start, by variant and
// direction.
func (c *candidate) applied() map[directedUse]int {
	out := map[directedUse]int{}
	for ; c.parent != nil; c = c.parent {
		out[directedUse{c.rw.Rule, c.rw.Reversed}]++
	}
	return out
}

// Optimize searches for a cheaper equivalent graph by applying the rule
// set's rules in both directions (TASO Algorithm 2): the cheapest graph is
// expanded first, every rewrite whose result type-checks and is new enters
// the queue if it costs less than Alpha times the best so far.
//
// The search stops within moments of its Timeout or of ctx's
// cancellation, also in the middle of expanding a large graph, and
// returns the best graph found so far (Stopped says why it stopped).
func Optimize(ctx context.Context, g *Graph, rs *version.Set, opt Options) (*Result, error) {
	if opt.MemoryLimit > 0 && g.Memory() > opt.MemoryLimit {
		return nil, fmt.Errorf("optimizer: the model needs %d MiB, above the memory limit of %d MiB", g.Memory()>>20, opt.MemoryLimit>>20)
	}
	announce(opt.Phase, PhaseSearch)
	s := &search{ctx: ctx, opt: opt, start: time.Now(), expanded: map[string]bool{}, done: map[rewrite.Hash]bool{}}
	s.deadline, s.reported = s.start.Add(opt.Timeout), s.start
	var unshaped int
	s.vs, s.rws, unshaped = variants(rs)
	s.matcher = rewrite.NewMatcher(s.rws)
	s.best = &candidate{g: g, cost: opt.Cost.Cost(g)}
	s.queue = candidates{s.best}
	s.res = &Result{Before: s.best.cost, Trace: []Progress{{Best: s.best.cost}}, Unshaped: unshaped, Seen: 1}
	for s.res.Stopped == Searching {
		if err := s.step(); err != nil {
			return nil, err
		}
	}
	// The search prices neighbours without building them: the best is
	// built once, here.
	best, err := s.best.graph()
	if err != nil {
		return nil, err
	}
	s.best.g = best
	s.report()
	s.confirm(ctx, g)
	res := s.res
	res.Graph, res.After, res.Elapsed = s.best.g, s.best.cost, time.Since(s.start)
	res.BeforeByOperator, res.AfterByOperator = ByOperator(opt.Cost, g), ByOperator(opt.Cost, res.Graph)
	res.Applied, res.Reversed = map[int]int{}, map[int]int{}
	for u, n := range s.best.applied() {
		res.Applied[s.vs[u.variant].rule] += n
		if u.reversed {
			res.Reversed[s.vs[u.variant].rule] += n
		}
	}
	return res, nil
}

// announce tells phase, if set, that a phase begins.
func announce(phase func(string), name string) {
	if phase != nil {
		phase(name)
	}
}

// confirm times the best graph's changes against the start graph's
// afresh, when the cost model drifts, and falls back to the start graph
// when the gain does not hold, cannot be timed, or the timing is
// interrupted: a measured gain is kept only once it held.
func (s *search) confirm(ctx context.Context, start *Graph) {
	c, ok := s.opt.Cost.(Confirmer)
	if !ok || s.opt.ConfirmRounds <= 0 || s.best.g == start {
		return
	}
	announce(s.opt.Phase, PhaseConfirmation)
	conf := &Confirmation{Rounds: s.opt.ConfirmRounds}
	before, after, err := c.Confirm(ctx, start, s.best.g, s.opt.ConfirmRounds)
	switch {
	case ctx.Err() != nil:
		conf.Err = ErrConfirmationInterrupted.Error()
	case err != nil:
		conf.Err = err.Error()
	default:
		conf.Before, conf.After = before, after
		conf.Held = before-after > s.opt.MinGain*s.res.Before
	}
	s.res.Confirmed = conf
	if !conf.Held {
		s.best = &candidate{g: start}
	}
	// Priced again: the fresh times replaced the search's.
	s.res.Before, s.best.cost = s.opt.Cost.Cost(start), s.opt.Cost.Cost(s.best.g)
	s.res.Trace = append(s.res.Trace, Progress{Elapsed: time.Since(s.start), Explored: s.res.Explored, Best: s.best.cost})
}

// ErrConfirmationInterrupted is the confirmation's error when the
// context was cancelled while it timed the gain.
var ErrConfirmationInterrupted = errors.New("interrupted before the gain was timed again")

// search is the state of one Optimize.
type search struct {
	ctx   context.Context
	opt   Options
	start time.Time
	// deadline is when the search times out; reported is when it last
	// told Progress.
	deadline, reported time.Time
	vs                 []variant
	rws                []rewrite.Rewrite
	expanded           map[string]bool       // keys of the graphs expanded
	done               map[rewrite.Hash]bool // scratch of each expansion (see neighbours)
	matcher            *rewrite.Matcher
	polls              int // calls of halted
	queue              candidates
	best               *candidate
	res                *Result
}

// step expands the cheapest queued graph, or says why the search stops.
//
// A graph may be queued more than once, as a neighbour of two graphs,
// or of its own neighbour (a rule's inverse), and is expanded once: the
// search keys a graph when it takes it from the queue, not each
// neighbour as it generates it. Few of the neighbours queued repeat one
// (vit_l_16: 363 of 120,000), and keying them all took 40% of a search,
// since a node's key is computed from its operands' and a rewrite
// changes the keys of all the nodes below it.
func (s *search) step() error {
	switch {
	case s.queue.Len() == 0:
		s.res.Stopped = QueueEmpty
	case s.res.Explored >= s.opt.Budget:
		s.res.Stopped = BudgetSpent
	case s.ctx.Err() != nil:
		s.res.Stopped = Interrupted
	case !time.Now().Before(s.deadline):
		s.res.Stopped = TimedOut
	}
	if s.res.Stopped != Searching {
		return nil
	}
	cur := heap.Pop(&s.queue).(*candidate)
	g, err := cur.graph()
	if err != nil {
		return err
	}
	key := rewrite.CommutativeKey(&g.G)
	if s.expanded[key] {
		s.res.Repeats++
		return nil
	}
	s.expanded[key] = true
	if s.opt.expanded != nil {
		s.opt.expanded(g, key)
	}
	cur.g, cur.expanded = g, true
	s.res.Explored++
	s.expand(cur)
	s.report()
	return nil
}

// halted says whether the search must stop now, in the middle of an
// expansion if need be: a graph of a thousand nodes has thousands of
// neighbours, a minute's work. It reports progress while it waits. It
// looks at the clock on every haltEvery-th call only: a call per match,
// each reading the clock, took 5% of inception_v3's search.
func (s *search) halted() bool {
	if s.polls++; s.polls%haltEvery != 0 {
		return false
	}
	now := time.Now()
	if now.Sub(s.reported) >= progressEvery {
		s.report()
	}
	return s.ctx.Err() != nil || !now.Before(s.deadline)
}

// report tells Progress how far the search is.
func (s *search) report() {
	s.reported = time.Now()
	if s.opt.Progress == nil {
		return
	}
	elapsed := time.Since(s.start)
	fraction := 1.0
	if s.res.Stopped == Searching {
		fraction = min(1, max(float64(s.res.Explored)/float64(max(s.opt.Budget, 1)), elapsed.Seconds()/max(s.opt.Timeout.Seconds(), 1e-9)))
	}
	s.opt.Progress(Progress{Elapsed: elapsed, Explored: s.res.Explored, Best: s.best.cost, Fraction: fraction})
}

// improves says whether a graph of this cost becomes the best.
func (s *search) improves(cost float64) bool {
	return cost < s.best.cost*(1-max(s.opt.MinGain, tieTolerance))
}

// mayKeep says whether consider would keep a graph of this cost.
func (s *search) mayKeep(cost float64) bool {
	return s.improves(cost) || cost < s.opt.Alpha*s.best.cost
}

// consider keeps a priced graph if it is the best so far, and queues it
// if it is within Alpha of the best. Only the expanded graphs stay built;
// the others are rebuilt when expanded, the best at the end.
func (s *search) consider(next *candidate) {
	if s.improves(next.cost) {
		if !s.best.expanded {
			s.best.g = nil
		}
		s.best = next
		s.res.Trace = append(s.res.Trace, Progress{Elapsed: time.Since(s.start), Explored: s.res.Explored, Best: next.cost})
	}
	if next.cost < s.opt.Alpha*s.best.cost {
		if next != s.best {
			next.g = nil
		}
		next.seq = s.res.Seen
		s.res.Seen++
		heap.Push(&s.queue, next)
	}
}

// expand hands consider the new graphs one rewrite away that type-check,
// until halted says to stop. Neighbours are type-checked, priced and
// keyed in place (see neighbours); only a cost model that prices whole
// graphs, or a memory limit, needs each new one built.
//
// Neighbours are not keyed: step drops a queued graph that repeats one
// expanded already.
func (s *search) expand(cur *candidate) {
	nb := newNeighbours(cur.g, s.opt.Cost, s.done)
	build := nb.pricer == nil || s.opt.MemoryLimit > 0
	s.matcher.MatchesAcyclic(&cur.g.G, nb, func(rw *rewrite.Rewrite, m *rewrite.Match) bool {
		if s.halted() {
			return false
		}
		if !cur.g.fitsRanks(&s.vs[rw.Rule], m) {
			return true // proved for other ranks
		}
		if !cur.g.fitsConditions(&s.vs[rw.Rule], m) {
			return true // proved where its conditions hold, not here
		}
		defer nb.undo()
		if nb.apply(rw, m) != applied {
			return true // a repeated change gives a graph seen already
		}
		s.res.Generated++
		if build {
			s.buildNeighbour(cur, rw, m)
			return true
		}
		cost, ok := nb.price()
		if !ok || !s.mayKeep(cost) {
			return true
		}
		s.consider(&candidate{cost: cost, parent: cur, rw: rw, match: cloneMatch(m)})
		return true
	})
}

// buildNeighbour builds, prices and considers a neighbour whole.
func (s *search) buildNeighbour(cur *candidate, rw *rewrite.Rewrite, m *rewrite.Match) {
	next := &candidate{parent: cur, rw: rw, match: cloneMatch(m)}
	if s.build(next) {
		s.consider(next)
	}
}

// build builds and prices a neighbour whole; it reports false for one
// that does not type-check or is over the memory limit.
func (s *search) build(next *candidate) bool {
	g, err := next.graph()
	if err != nil {
		return false // the rule does not fit these shapes here
	}
	if s.opt.MemoryLimit > 0 && g.Memory() > s.opt.MemoryLimit {
		s.res.OverMemory++
		return false
	}
	next.g, next.cost = g, s.opt.Cost.Cost(g)
	return true
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

func (c candidates) Len() int { return len(c) }
func (c candidates) Less(i, j int) bool {
	return c[i].cost < c[j].cost || c[i].cost == c[j].cost && c[i].seq < c[j].seq
}
func (c candidates) Swap(i, j int) { c[i], c[j] = c[j], c[i] }
func (c *candidates) Push(x any)   { *c = append(*c, x.(*candidate)) }
func (c *candidates) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}
