package enumerate

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"rulebook/fingerprint"
	"rulebook/internal/budget"
	"rulebook/internal/pool"
	"rulebook/internal/progress"
	"rulebook/rules"
)

// Config selects what to enumerate.
type Config struct {
	Registry *rules.Registry
	// Pool is the input pool of an operator set without degree
	// parameters; one with them takes rules.ParallelPool at each degree.
	Pool   rules.Pool
	MaxOps int
	// Degrees are the parallel degrees to enumerate (rules.ParseDegrees),
	// for an operator set with degree parameters only; nil means 2.
	Degrees []int
	Seed    uint64
	Workers int
	// Exhaustive extends every graph, not only class representatives
	// (TASO's behaviour; far slower, used to cross-check RepGen).
	Exhaustive bool
	// Tolerance of the float64 check, relative to max(1, |a|, |b|).
	Tolerance float64
	Progress  progress.Func
	// ConditionKernels, if set, are kernel extents ({1, 1}) at which to
	// look for conditioned rules too (GenerateConditioned): opt-in, since
	// it enumerates again.
	ConditionKernels [][2]int
	// Memory bounds the input pools and the workers' caches (CheckMemory);
	// the zero value is the machine's default.
	Memory budget.Budget
}

// LevelStats counts one graph size.
type LevelStats struct {
	Ops        int   `json:"ops"`
	Graphs     int64 `json:"graphs"`
	NewClasses int64 `json:"new_classes"`
	Members    int64 `json:"members"`
}

// Stats are the per-stage counts that generate prints.
type Stats struct {
	Levels     []LevelStats `json:"levels"`
	Graphs     int64        `json:"graphs"`
	Classes    int64        `json:"classes"`
	Collisions int64        `json:"collisions"`
	Candidates int64        `json:"candidates"`
	// Degrees were enumerated one at a time; Generalised counts the
	// distinct rules found at every one of them and stored once, with the
	// degree variable d (see generalizeDegrees).
	Degrees     []int `json:"degrees,omitempty"`
	Generalised int64 `json:"generalised,omitempty"`
}

// Candidate is a pair of graphs that agree on the fingerprint inputs and
// on an independent float64 test. Src is the larger graph.
type Candidate struct {
	Rule        *rules.Rule // canonical form
	Text        rules.Text
	Fingerprint uint64
}

// Result is the outcome of a generation.
type Result struct {
	Stats      Stats
	Candidates []Candidate
}

type rep struct {
	g       graph
	trivial []uint8
}

// record is one enumerated graph, compactly: the item it extends, which
// relabelling of the item's inputs, and the node added (graphOf rebuilds
// it). Sixteen bytes, since the largest level holds hundreds of millions.
type record struct {
	fp   uint64
	item uint32
	code uint32 // relabelling<<24 | template<<16 | operand0<<8 | operand1
}

// recordChunks stores records in fixed-size chunks: a growing slice would
// briefly need twice its size at every doubling.
type recordChunks [][]record

const chunkSize = 1 << 20

func (c *recordChunks) add(r record) {
	n := len(*c)
	if n == 0 || len((*c)[n-1]) == chunkSize {
		*c = append(*c, make([]record, 0, chunkSize))
		n++
	}
	(*c)[n-1] = append((*c)[n-1], r)
}

func (c recordChunks) len() int {
	n := 0
	for _, ch := range c {
		n += len(ch)
	}
	return n
}

const (
	maxClasses      = 16 // worker.attempt tracks used copies per class in a fixed array
	maxTemplates    = 255
	maxRelabellings = 255
)

// graphOf rebuilds the graph a record stands for.
func (l *layout) graphOf(items []graph, r record) graph {
	item := items[r.item]
	rls := l.relabellings(item)
	g := l.relabel(item, rls[r.code>>24].images)
	g.nodes[g.n] = node{t: uint16(r.code >> 16 & 0xff), args: [2]uint8{uint8(r.code >> 8), uint8(r.code)}}
	g.n++
	return g
}

type generator struct {
	cfg       Config
	l         *layout
	inputs    fingerprint.Inputs
	intIn     []*rules.IntTensor
	inHash    []uint64
	floatIn   [floatDraws][]*rules.FloatTensor // filled on demand
	floatMu   sync.Mutex
	verdictMu sync.Mutex
	verdicts  map[string]bool // float verdicts by rule text and shapes
	classes   map[uint64]int32
	reps      [][]rep
	prevItems []graph
	// extraItems are collision representatives found by check.
	extraItems []graph
	stats      Stats
	// memoCap bounds the bytes of each worker's cache of results.
	memoCap uint64
}

// Generate enumerates graphs up to cfg.MaxOps operators and returns the
// candidate rules. An operator set with degree parameters is enumerated
// once per degree, every degree parameter taking that degree, and the
// rules found at every degree are stored once with the degree variable.
func Generate(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.MaxOps < 1 || cfg.MaxOps > MaxOps {
		return nil, fmt.Errorf("max-ops must be between 1 and %d, got %d", MaxOps, cfg.MaxOps)
	}
	if cfg.Workers < 1 {
		cfg.Workers = min(runtime.GOMAXPROCS(0), MaxWorkers)
	}
	cfg.Memory = cfg.Memory.Resolved()
	if err := CheckMemory(cfg); err != nil {
		return nil, err
	}
	if cfg.Tolerance == 0 {
		cfg.Tolerance = 1e-5
	}
	if !cfg.Registry.HasDegreeParams() {
		if cfg.Degrees != nil {
			return nil, fmt.Errorf("degrees %v given, but operator set %v has no degree parameters", cfg.Degrees, cfg.Registry.Names())
		}
		res, err := generateAt(ctx, cfg, 0)
		for _, dims := range cfg.ConditionKernels {
			if err != nil {
				break
			}
			var more *Result
			if more, err = GenerateConditioned(ctx, cfg, dims); err == nil {
				res.Candidates = append(res.Candidates, more.Candidates...)
				res.Stats.Candidates += more.Stats.Candidates
			}
		}
		return res, err
	}
	degrees := cfg.Degrees
	if degrees == nil {
		degrees = []int{rules.BaseDegree}
	}
	var results []*Result
	for _, d := range degrees {
		res, err := generateAt(ctx, cfg, d)
		if err != nil {
			return nil, fmt.Errorf("degree %d: %w", d, err)
		}
		results = append(results, res)
	}
	return mergeDegrees(results, degrees), nil
}

// generateAt enumerates at one degree (0 for a set without degrees).
func generateAt(ctx context.Context, cfg Config, degree int) (*Result, error) {
	if degree > 0 {
		cfg.Pool = rules.ParallelPool(degree)
		if report := cfg.Progress; report != nil {
			cfg.Progress = func(s progress.Step) {
				s.Stage = fmt.Sprintf("%s d=%d", s.Stage, degree)
				report(s)
			}
		}
	}
	g, err := newGenerator(cfg, degree)
	if err != nil {
		return nil, err
	}
	var cands []Candidate
	g.addTrivialClasses()
	items := []graph{{}}
	for n := 1; n <= cfg.MaxOps; n++ {
		recs, err := g.expand(ctx, n, items)
		if err != nil {
			return nil, err
		}
		last := n == cfg.MaxOps
		next, members, newClasses, err := g.classify(ctx, items, recs, last)
		if err != nil {
			return nil, err
		}
		lc, err := g.check(ctx, n, members)
		if err != nil {
			return nil, err
		}
		cands = append(cands, lc...)
		g.stats.Levels = append(g.stats.Levels, LevelStats{Ops: n, Graphs: int64(len(recs)), NewClasses: newClasses, Members: int64(len(members))})
		g.stats.Graphs += int64(len(recs))
		g.stats.Classes += newClasses
		recs = nil
		items = append(next, g.extraItems...)
		slices.SortFunc(items, func(a, b graph) int { return cmpGraph(&a, &b) })
		g.extraItems = nil
		g.prevItems = items
	}
	g.stats.Candidates = int64(len(cands))
	return &Result{Stats: g.stats, Candidates: dedupe(cands)}, nil
}

func newGenerator(cfg Config, degree int) (*generator, error) {
	tmpls := templates(cfg.Registry, cfg.Pool, degree)
	if len(tmpls) > maxTemplates {
		return nil, fmt.Errorf("operator set yields %d templates, more than %d", len(tmpls), maxTemplates)
	}
	if len(tmpls) == 0 {
		return nil, fmt.Errorf("operator set %v yields no operator templates", cfg.Registry.Names())
	}
	l := &layout{tmpls: tmpls}
	if len(cfg.Pool.Classes) > maxClasses {
		return nil, fmt.Errorf("input pool has %d classes, more than %d", len(cfg.Pool.Classes), maxClasses)
	}
	for c, ic := range cfg.Pool.Classes {
		if ic.Copies < 1 || ic.Copies > 64 {
			return nil, fmt.Errorf("input class %s: copies must be 1..64, got %d", ic.Name, ic.Copies)
		}
		l.start = append(l.start, l.nIn)
		l.copies = append(l.copies, ic.Copies)
		for k := 0; k < ic.Copies; k++ {
			l.class = append(l.class, c)
			l.copyOf = append(l.copyOf, k)
			l.nIn++
		}
	}
	if l.nIn+2*MaxOps > noArg {
		return nil, fmt.Errorf("input pool too large: %d inputs", l.nIn)
	}
	for _, t := range tmpls {
		l.arity = append(l.arity, t.op.Arity)
		l.nOut = append(l.nOut, t.op.Outputs)
	}
	pool, err := poolBytes(cfg.Memory, cfg.Pool, degree)
	if err != nil {
		return nil, err
	}
	g := &generator{cfg: cfg, l: l, inputs: fingerprint.Inputs{Seed: cfg.Seed}, classes: map[uint64]int32{}, verdicts: map[string]bool{},
		memoCap: memoBytes(cfg.Memory, pool, cfg.Workers)}
	for i := 0; i < l.nIn; i++ {
		s := cfg.Pool.Classes[l.class[i]].Shape
		t := g.inputs.Int(i, s)
		g.intIn = append(g.intIn, t)
		g.inHash = append(g.inHash, fingerprint.Tensor(t))
	}
	return g, nil
}

// addTrivialClasses registers the graphs without operators: one input, or
// two inputs (what a split of a concat gives back).
func (g *generator) addTrivialClasses() {
	l := g.l
	add := func(outs ...uint8) {
		hs := make([]uint64, len(outs))
		for i, v := range outs {
			hs[i] = g.inHash[v]
		}
		fp := fingerprint.Combine(hs)
		if _, ok := g.classes[fp]; !ok {
			g.classes[fp] = int32(len(g.reps))
			g.reps = append(g.reps, []rep{{trivial: outs}})
			g.stats.Classes++
		}
		g.stats.Graphs++
	}
	for c := range l.start {
		add(uint8(l.start[c]))
	}
	for c := range l.start {
		if l.copies[c] > 1 {
			add(uint8(l.start[c]), uint8(l.start[c]+1))
		}
		for d := c + 1; d < len(l.start); d++ {
			add(uint8(l.start[c]), uint8(l.start[d]))
		}
	}
}

// expand extends every item by one operator, in parallel, and returns the
// accepted graphs sorted by fingerprint then encoding.
func (g *generator) expand(ctx context.Context, level int, items []graph) ([]record, error) {
	workers := make([]*worker, g.cfg.Workers)
	for w := range workers {
		workers[w] = newWorker(ctx, g)
	}
	var done atomic.Int64
	err := pool.Each(ctx, g.cfg.Workers, len(items), func(w, i int) error {
		if err := workers[w].processItem(uint32(i), items[i]); err != nil {
			return err
		}
		if d := done.Add(1); d%64 == 0 || d == int64(len(items)) {
			g.cfg.Progress.Report(progress.Step{Stage: "enumerate", Level: level, Done: d, Total: int64(len(items))})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	results := make([]recordChunks, len(workers))
	for w, wk := range workers {
		results[w], wk.recs = wk.recs, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	total := 0
	for _, r := range results {
		total += r.len()
	}
	// Copy chunk by chunk, dropping each one, so that the peak stays near
	// one copy of the records.
	recs := make([]record, 0, total)
	for w := range results {
		for k := range results[w] {
			recs = append(recs, results[w][k]...)
			results[w][k] = nil
		}
	}
	slices.SortFunc(recs, func(a, b record) int {
		if c := cmp.Compare(a.fp, b.fp); c != 0 {
			return c
		}
		if c := cmp.Compare(a.item, b.item); c != 0 {
			return c
		}
		return cmp.Compare(a.code, b.code)
	})
	return recs, nil
}

type member struct {
	g     graph
	fp    uint64
	class int32
}

// classify assigns records to fingerprint classes. The smallest graph of a
// new class is its representative; the others, and every graph of a class
// seen at a smaller size, are members to pair. It returns the graphs to
// extend next (representatives, or all graphs when exhaustive) and the
// number of new classes. At the last level a lone graph of a new class is
// only counted, never rebuilt.
func (g *generator) classify(ctx context.Context, items []graph, recs []record, last bool) (next []graph, members []member, newClasses int64, err error) {
	keepAll := g.cfg.Exhaustive && !last
	for i, groups := 0, 0; i < len(recs); groups++ {
		if groups%(1<<16) == 0 && ctx.Err() != nil {
			return nil, nil, 0, ctx.Err()
		}
		j := i + 1
		for j < len(recs) && recs[j].fp == recs[i].fp {
			j++
		}
		fp := recs[i].fp
		c, known := g.classes[fp]
		if !known && j-i == 1 && last {
			newClasses++
			i = j
			continue
		}
		group := make([]graph, 0, j-i)
		for k := i; k < j; k++ {
			group = append(group, g.l.graphOf(items, recs[k]))
		}
		slices.SortFunc(group, func(a, b graph) int { return cmpGraph(&a, &b) })
		first := 0
		if !known {
			newClasses++
			c = int32(len(g.reps))
			g.classes[fp] = c
			g.reps = append(g.reps, []rep{{g: group[0]}})
			if !last {
				next = append(next, group[0])
			}
			first = 1
		}
		for _, gr := range group[first:] {
			members = append(members, member{g: gr, fp: fp, class: c})
			if keepAll {
				next = append(next, gr)
			}
		}
		i = j
	}
	return next, members, newClasses, nil
}

// dedupe keeps one candidate of each canonical text; generalisation and
// renaming make many pairs the same rule. Of the pairs that give one rule
// it keeps the first found, unless a later one has inputs in fewer pieces:
// a parallel rule is recorded with its inputs laid out as simply as it
// was found (relu commutes with partition on a whole tensor, not only on
// one already cut), which also keeps the float test's sizes at degree d
// small (FloatCheckAtDegree). Inputs of the default set are all in one
// piece, so there the first pair always stays.
func dedupe(cands []Candidate) []Candidate {
	index := map[string]int{}
	var out []Candidate
	for _, c := range cands {
		h := c.Text.Hash()
		if i, seen := index[h]; seen {
			if inputPieces(c) < inputPieces(out[i]) {
				out[i] = c
			}
			continue
		}
		index[h] = len(out)
		out = append(out, c)
	}
	return out
}

// inputPieces counts the pieces of a candidate's inputs.
func inputPieces(c Candidate) int {
	n := 0
	for _, s := range c.Rule.InputShapes {
		n += s.Pieces()
	}
	return n
}

// floatInputs returns the pool's inputs for float draw d.
func (g *generator) floatInputs(d int) []*rules.FloatTensor {
	g.floatMu.Lock()
	defer g.floatMu.Unlock()
	if g.floatIn[d] == nil {
		for i := 0; i < g.l.nIn; i++ {
			g.floatIn[d] = append(g.floatIn[d], g.inputs.Float(fingerprint.Draw(d), i, g.cfg.Pool.Classes[g.l.class[i]].Shape))
		}
	}
	return g.floatIn[d]
}
