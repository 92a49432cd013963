// Package progress is the one shape of progress report, and the terminal
// bars that show it. A long computation reports each Step to a Func. A Bar
// draws one bar per stage (and graph size), or one whose description
// changes as it goes. When the output is not a terminal, or bars are off,
// it writes one line as each stage begins, so a log stays clean.
// docs/design.md's package map lists it.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
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
	// shown are the stages a line was written for, without a bar:
	// workers that report out of order write none twice.
	shown map[string]bool
}

// New draws on w when it is a terminal and disabled is false.
func New(w io.Writer, disabled bool) *Bar {
	b := &Bar{w: w, shown: map[string]bool{}}
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
		if !b.enabled {
			if !b.shown[key] {
				b.shown[key] = true
				fmt.Fprintf(b.w, "started %s (%d to do)\n", strings.TrimSpace(desc), total)
			}
			return
		}
		b.bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(b.w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish())
	}
	if b.enabled {
		_ = b.bar.Set64(done)
	}
}

// Count shows done of total items in a stage that has no levels.
func (b *Bar) Count(stage string, done, total int) {
	b.Update(stage, 0, int64(done), int64(total))
}

// Report draws s; it is the bar as a Func.
func (b *Bar) Report(s Step) { b.Update(s.Stage, s.Level, s.Done, s.Total) }

// Stage is the bar as a Func that names every step stage.
func (b *Bar) Stage(stage string) Func { return Func(b.Report).Stage(stage) }

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

// Line writes text as a line where no bar is drawn, once: a phase of the
// work beginning, which a bar shows in its own way.
func (b *Bar) Line(text string) {
	if b.enabled {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.shown["line "+text] {
		b.shown["line "+text] = true
		fmt.Fprintln(b.w, text)
	}
}

// Phase shows text, a phase of the work beginning: as the bar's full
// description where one is drawn, else as a line (see Line).
func (b *Bar) Phase(text string) {
	if b.enabled {
		b.Status(text, 1000, 1000)
		return
	}
	b.Line(text)
}
