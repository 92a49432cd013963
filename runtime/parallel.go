package runtime

import (
	"sync"
	"sync/atomic"
)

// workers runs loop bodies on a fixed set of goroutines. A Session owns one
// and uses it from a single goroutine at a time (Run holds the session's
// lock), so one job description is reused for every parallel loop and
// dispatching a loop allocates nothing: the loop bodies themselves are bound
// once, when the session is created.
type workers struct {
	threads int
	wake    chan struct{}
	done    sync.WaitGroup

	// The current job: body (or bodyID, with the worker's number) is
	// called on chunks [lo, hi) of [0, n).
	body   func(lo, hi int)
	bodyID func(id, lo, hi int)
	n      int
	chunk  int
	next   atomic.Int64
}

// newWorkers starts threads-1 helper goroutines; the goroutine that calls
// parallelFor is the last worker. stop ends the helpers.
func newWorkers(threads int) *workers {
	w := &workers{threads: max(threads, 1), wake: make(chan struct{}, threads)}
	for id := range w.threads - 1 {
		go w.help(id)
	}
	return w
}

func (w *workers) stop() { close(w.wake) }

func (w *workers) help(id int) {
	for range w.wake {
		w.drain(id)
		w.done.Done()
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
	w.done.Add(helpers)
	for range helpers {
		w.wake <- struct{}{}
	}
	w.drain(w.threads - 1)
	w.done.Wait()
	w.body, w.bodyID = nil, nil
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
