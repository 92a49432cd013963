// Package pool runs numbered work items on a fixed number of goroutines.
// It is the one worker pool of the module. Generation, verification, the
// axiom checks and compare all hand their items to Each.
// docs/design.md's package map lists it.
package pool

import (
	"context"
	"sync"
	"sync/atomic"
)

// Each calls fn(w, i) for every i in [0, n), on at most workers
// goroutines (at least one). w is the goroutine's index, below workers,
// so fn may keep state per goroutine in a slice indexed by w.
//
// Items are handed out in increasing order. After the first error, or
// once ctx is cancelled, no new item starts; items already started finish.
// Each returns the error of the lowest item that failed, so the error does
// not depend on timing: every lower item had started and ran to its end.
// With no item failed it returns ctx's error, if any.
func Each(ctx context.Context, workers, n int, fn func(w, i int) error) error {
	workers = max(1, min(workers, n))
	errs := make([]error, n)
	var next atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() && ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if errs[i] = fn(w, i); errs[i] != nil {
					stop.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}
