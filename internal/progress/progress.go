// Package progress draws progress bars on a terminal: one bar per stage
// (and graph size) of a long computation, or one whose description
// changes as it goes. When the output is not a terminal it draws nothing,
// so that logs and pipes stay clean.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Bar is the bar being drawn. Workers report concurrently, so every
// method takes the lock.
type Bar struct {
	mu      sync.Mutex
	w       io.Writer
	enabled bool
	bar     *progressbar.ProgressBar
	key     string
}

// New draws on w when it is a terminal and disabled is false.
func New(w io.Writer, disabled bool) *Bar {
	b := &Bar{w: w}
	if f, ok := w.(*os.File); ok && !disabled {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			b.enabled = true
		}
	}
	return b
}

// Update shows done of total in a stage at a level (a graph size); a new
// stage or level starts a new bar.
func (b *Bar) Update(stage string, level int, done, total int64) {
	if !b.enabled {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	key := fmt.Sprintf("%s %d", stage, level)
	if key != b.key {
		b.finishLocked()
		b.key = key
		desc := fmt.Sprintf("%-9s %d ops", stage, level)
		if level == 0 { // a stage without graph sizes: verify, prune
			desc = fmt.Sprintf("%-15s", stage)
		}
		b.bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(b.w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish())
	}
	_ = b.bar.Set64(done)
}

// Count shows done of total items in a stage that has no levels.
func (b *Bar) Count(stage string, done, total int) {
	b.Update(stage, 0, int64(done), int64(total))
}

// Stage is Count for one stage.
func (b *Bar) Stage(stage string) func(done, total int) {
	return func(done, total int) { b.Count(stage, done, total) }
}

// Status draws one bar whose description changes as it goes, such as the
// best cost a search has found.
func (b *Bar) Status(desc string, done, total int64) {
	if !b.enabled {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.key != "status" {
		b.finishLocked()
		b.key = "status"
		b.bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(b.w), progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	b.bar.Describe(desc)
	_ = b.bar.Set64(done)
}

// Finish clears the bar from the terminal.
func (b *Bar) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.finishLocked()
}

func (b *Bar) finishLocked() {
	if b.bar != nil {
		_ = b.bar.Finish()
		b.bar = nil
	}
}
