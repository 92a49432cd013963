package runtime

import (
	goruntime "runtime"
	"sync/atomic"
	"time"
)

// workers runs loop bodies on a fixed set of goroutines. A Session owns one
// and uses it from a single goroutine at a time (Run holds the session's
// lock), so one job description is reused for every parallel loop and
// dispatching a loop allocates nothing: the loop bodies themselves are bound
// once, when the session is created.
//
// Helpers and the dispatching goroutine spin for up to spinFor before they
// park. A model runs hundreds of parallel loops back to back, and waking a
// parked goroutine costs tens of microseconds on a virtual machine: with
// parking only, inception_v3 at two threads ran 1.3× faster than on one.
// Spinning is bounded so that an idle session, or one on a machine with
// more threads than cores, gives its cores back soon.
type workers struct {
	threads int
	helpers []helper
	stopped atomic.Bool

	// The current job: body (or bodyID, with the worker's number) is
	// called on chunks [lo, hi) of [0, n).
	body   func(lo, hi int)
	bodyID func(id, lo, hi int)
	n      int
	chunk  int
	next   atomic.Int64

	// pending counts the helpers still on the job. join settles whether
	// the dispatcher parked (joinParked, then the last helper sends on
	// finished) or the helpers finished first (joinDone). It holds the
	// job's number beside the state (join(gen, state)): the last helper
	// of a job may reach its compare-and-swap after the dispatcher, which
	// saw pending at 0, has started the next job, and must then touch
	// nothing.
	gen      uint64
	pending  atomic.Int32
	join     atomic.Uint64
	finished chan struct{}

	// lastDone, nil but in tests, runs when a job's last helper has
	// counted itself done, before it settles join: tests widen that
	// window with it.
	lastDone func()

	// part and parts serve RunParts (gemm's Runner) without allocating.
	part  func(i int)
	parts func(lo, hi int)
}

// spinFor bounds the spinning of an idle helper or a waiting dispatcher.
const spinFor = 100 * time.Microsecond

// A helper's state: spinning for a job, parked on wake, or given a job.
const (
	helperSpinning int32 = iota
	helperParked
	helperClaimed
)

// The dispatcher's wait for its helpers: spinning, done, or parked.
const (
	joinSpinning uint64 = iota
	joinDone
	joinParked
)

// join packs a job's number and the dispatcher's wait state.
func join(gen, state uint64) uint64 { return gen<<2 | state }

type helper struct {
	state atomic.Int32
	wake  chan struct{}
	_     [56]byte // a cache line each: helpers poll their own state
}

// newWorkers starts threads-1 helper goroutines; the goroutine that calls
// parallelFor is the last worker. stop ends the helpers.
func newWorkers(threads int) *workers {
	w := &workers{threads: max(threads, 1), finished: make(chan struct{}, 1)}
	w.helpers = make([]helper, w.threads-1)
	w.parts = func(lo, hi int) {
		for i := lo; i < hi; i++ {
			w.part(i)
		}
	}
	for id := range w.helpers {
		w.helpers[id].wake = make(chan struct{}, 1)
		go w.help(id)
	}
	return w
}

func (w *workers) stop() {
	w.stopped.Store(true)
	for i := range w.helpers {
		close(w.helpers[i].wake)
	}
}

func (w *workers) help(id int) {
	h := &w.helpers[id]
	for h.await(&w.stopped) {
		gen := w.gen // published before the claim
		w.drain(id)
		h.state.Store(helperSpinning) // before finishing: the next job may come at once
		if w.pending.Add(-1) != 0 {
			continue
		}
		if w.lastDone != nil {
			w.lastDone()
		}
		if !w.join.CompareAndSwap(join(gen, joinSpinning), join(gen, joinDone)) && w.join.Load() == join(gen, joinParked) {
			w.finished <- struct{}{} // the dispatcher parked, and waits for this
		}
	}
}

// await returns true when h is given a job, false when the workers stop.
func (h *helper) await(stopped *atomic.Bool) bool {
	start := time.Now()
	for i := 1; ; i++ {
		if h.state.Load() == helperClaimed {
			return true
		}
		if i%64 != 0 {
			continue
		}
		if stopped.Load() {
			return false
		}
		if time.Since(start) < spinFor {
			goruntime.Gosched()
			continue
		}
		if !h.state.CompareAndSwap(helperSpinning, helperParked) {
			return true // claimed just now
		}
		_, ok := <-h.wake
		return ok
	}
}

// start gives helper id the current job.
func (w *workers) start(id int) {
	h := &w.helpers[id]
	if h.state.CompareAndSwap(helperSpinning, helperClaimed) {
		return
	}
	h.state.Store(helperClaimed) // it parked
	h.wake <- struct{}{}
}

// wait returns when every helper given the current job is done.
func (w *workers) wait() {
	start := time.Now()
	for i := 1; w.pending.Load() > 0; i++ {
		if i%64 != 0 {
			continue
		}
		if time.Since(start) < spinFor {
			goruntime.Gosched() // lets helpers run where threads exceed GOMAXPROCS
			continue
		}
		if w.join.CompareAndSwap(join(w.gen, joinSpinning), join(w.gen, joinParked)) {
			<-w.finished
		}
		return
	}
}

// drain claims chunks of the current job for worker id until none is
// left.
func (w *workers) drain(id int) {
	for {
		lo := int(w.next.Add(1)-1) * w.chunk
		if lo >= w.n {
			return
		}
		if w.bodyID != nil {
			w.bodyID(id, lo, min(lo+w.chunk, w.n))
		} else {
			w.body(lo, min(lo+w.chunk, w.n))
		}
	}
}

// parallelFor calls body over [0, n) in chunks of at least grain items,
// spread over the workers; it returns when every chunk is done. Chunks are
// claimed dynamically, so uneven chunk costs balance out.
func (w *workers) parallelFor(n, grain int, body func(lo, hi int)) {
	w.run(n, grain, body, nil)
}

// parallelForID is parallelFor for coarse items with per-worker state
// (scratch buffers): body is also told which worker, 0 … threads−1, runs
// the items, and items are claimed one at a time, which balances a few
// large items best.
func (w *workers) parallelForID(n int, body func(id, lo, hi int)) {
	w.run(n, 1, nil, body)
}

func (w *workers) run(n, grain int, body func(lo, hi int), bodyID func(id, lo, hi int)) {
	if n <= 0 {
		return
	}
	grain = max(grain, 1)
	if w.threads == 1 || n <= grain {
		if bodyID != nil {
			bodyID(w.threads-1, 0, n)
		} else {
			body(0, n)
		}
		return
	}
	chunk := chunkSize(n, grain, w.threads)
	if bodyID != nil {
		chunk = 1
	}
	chunks := (n + chunk - 1) / chunk
	helpers := min(w.threads-1, chunks-1)
	w.body, w.bodyID, w.n, w.chunk = body, bodyID, n, chunk
	w.next.Store(0)
	w.pending.Store(int32(helpers))
	w.gen++
	w.join.Store(join(w.gen, joinSpinning))
	for id := range helpers {
		w.start(id)
	}
	w.drain(w.threads - 1)
	w.wait()
	w.body, w.bodyID = nil, nil
}

// Threads and RunParts make workers a gemm.Runner, so that a session's
// products run on its own threads.
func (w *workers) Threads() int { return w.threads }

func (w *workers) RunParts(parts int, part func(i int)) {
	w.part = part
	w.run(parts, 1, w.parts, nil)
	w.part = nil
}

// chunkSize splits n items among threads: about four chunks per thread
// balance uneven costs without much overhead, but where grain allows fewer
// the count is rounded down to a multiple of threads, so that no thread is
// left one chunk more than the others (3 chunks of a 64×768 LayerNorm
// step on 2 threads took as long as 4).
func chunkSize(n, grain, threads int) int {
	chunks := min(4*threads, n/grain)
	if chunks >= threads {
		chunks -= chunks % threads
	} else {
		chunks = min(threads, (n+grain-1)/grain)
	}
	return (n + chunks - 1) / chunks
}
