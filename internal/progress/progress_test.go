package progress

import (
	"io"
	"strings"
	"sync"
	"testing"
)

// TestProgressFromManyGoroutines: workers report concurrently, across
// stage changes; the bar must not be used while it is being replaced.
func TestProgressFromManyGoroutines(t *testing.T) {
	p := &Bar{w: io.Discard, enabled: true, shown: map[string]bool{}}
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

// Without a terminal, or with bars turned off, each stage writes one line
// as it begins (issue 25: a --no-progress build printed nothing until it
// ended), and none twice when workers report out of order.
func TestLinePerStageWithoutBar(t *testing.T) {
	var out strings.Builder
	b := New(&out, true)
	for _, level := range []int{1, 1, 2, 1, 2} {
		b.Update("enumerate", level, 1, 10)
	}
	b.Count("verify", 0, 7)
	b.Count("verify", 3, 7)
	b.Finish()
	want := "started enumerate 1 ops (10 to do)\nstarted enumerate 2 ops (10 to do)\nstarted verify (7 to do)\n"
	if out.String() != want {
		t.Errorf("wrote %q, want %q", out.String(), want)
	}
}
