package runtime

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestParallelForCoversOnce runs parallelFor over sizes around the grain
// and its multiples and checks that every index is visited exactly once,
// and that the chunk count is a multiple of the thread count wherever the
// grain allows one chunk per thread.
func TestParallelForCoversOnce(t *testing.T) {
	for _, threads := range []int{1, 2, 3} {
		w := newWorkers(threads)
		for _, n := range []int{1, 15, 16, 17, 31, 48, 49, 64, 100, 1000} {
			seen := make([]atomic.Int32, n)
			w.parallelFor(n, 16, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					seen[i].Add(1)
				}
			})
			for i := range seen {
				if c := seen[i].Load(); c != 1 {
					t.Fatalf("threads %d, n %d: index %d visited %d times", threads, n, i, c)
				}
			}
			chunk := chunkSize(n, 16, threads)
			if chunks := (n + chunk - 1) / chunk; n >= 16*threads && chunks%threads != 0 {
				t.Errorf("threads %d, n %d: %d chunks of %d", threads, n, chunks, chunk)
			}
		}
		w.stop()
	}
}

// TestWorkersSpinAndPark dispatches jobs back to back and after pauses
// longer than spinFor, so that helpers are claimed both while spinning
// and after parking, and the dispatcher waits both ways (a slow last
// chunk); every index must be visited once, and no worker id may run two
// chunks at once.
func TestWorkersSpinAndPark(t *testing.T) {
	for _, threads := range []int{2, 3, 4} {
		w := newWorkers(threads)
		for round, pause := range []time.Duration{0, 0, 3 * spinFor, 0, 5 * spinFor, 0} {
			time.Sleep(pause)
			n := 7 + round
			seen := make([]atomic.Int32, n)
			busy := make([]atomic.Int32, threads)
			w.parallelForID(n, func(id, lo, hi int) {
				if busy[id].Add(1) != 1 {
					t.Errorf("worker %d runs two chunks at once", id)
				}
				if lo == n-1 && round%2 == 1 {
					time.Sleep(3 * spinFor) // the dispatcher parks
				}
				for i := lo; i < hi; i++ {
					seen[i].Add(1)
				}
				busy[id].Add(-1)
			})
			for i := range seen {
				if c := seen[i].Load(); c != 1 {
					t.Fatalf("threads %d, round %d: index %d visited %d times", threads, round, i, c)
				}
			}
		}
		w.stop()
	}
}

// TestWorkersReturnAfterEveryChunk runs jobs back to back and checks
// that every job's chunks have all finished when the loop returns: the
// last helper of one job must not settle the next job's wait (a bug that
// let a product's parts run on after their job was recycled, seen once in
// CI). lastDone holds the last helper of every fifth job back while the
// next job starts, and that job's chunks outlast spinFor, so that its
// dispatcher parks.
func TestWorkersReturnAfterEveryChunk(t *testing.T) {
	for _, threads := range []int{2, 3, 4} {
		w := newWorkers(threads)
		var job atomic.Int32
		w.lastDone = func() {
			if job.Load()%5 == 4 {
				time.Sleep(spinFor / 4)
			}
		}
		for j := range 200 {
			job.Store(int32(j))
			var done atomic.Int32
			n := 2 * threads
			w.parallelFor(n, 1, func(lo, hi int) {
				if j%5 == 0 {
					time.Sleep(2 * spinFor)
				}
				done.Add(int32(hi - lo))
			})
			if got := done.Load(); got != int32(n) {
				t.Fatalf("threads %d, job %d: returned with %d of %d items done", threads, j, got, n)
			}
		}
		w.stop()
	}
}
