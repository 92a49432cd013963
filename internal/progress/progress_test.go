package progress

import (
	"io"
	"sync"
	"testing"
)

// TestProgressFromManyGoroutines: workers report concurrently, across
// stage changes; the bar must not be used while it is being replaced.
func TestProgressFromManyGoroutines(t *testing.T) {
	p := &Bar{w: io.Discard, enabled: true}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				p.Update("enumerate", (i+g)%3, int64(i), 2000)
			}
		}(g)
	}
	wg.Wait()
	p.Finish()
}
