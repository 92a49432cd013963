package main

import (
	"io"
	"sync"
	"testing"

	"rulebook/enumerate"
)

// TestProgressFromManyGoroutines: workers report concurrently, across
// stage changes; the bar must not be used while it is being replaced.
func TestProgressFromManyGoroutines(t *testing.T) {
	p := &progress{w: io.Discard, enabled: true}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				p.update(enumerate.Progress{Stage: "enumerate", Level: (i + g) % 3, Done: int64(i), Total: 2000})
			}
		}(g)
	}
	wg.Wait()
	p.finish()
}
