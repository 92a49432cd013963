// Package budget bounds the memory a command may allocate for sizes that
// come from its inputs. These are tensor shapes a model declares, degrees a
// rule names and worker counts a flag gives. Each such size is checked
// before it is allocated. So a hostile or mistaken input is refused with one
// line naming where the size came from, not with an out-of-memory crash.
// docs/design.md's package map lists it.
package budget

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"strconv"
	"strings"
)

// ErrExceeded is what every refusal wraps.
var ErrExceeded = errors.New("over the memory budget")

// ExceededError is a refused allocation: What names the file or flag and
// the field, Bytes is the size asked for (Overflow when it does not fit
// in 64 bits) and Limit the budget.
type ExceededError struct {
	What     string
	Bytes    uint64
	Overflow bool
	Limit    uint64
}

func (e *ExceededError) Error() string {
	size := FormatBytes(e.Bytes)
	if e.Overflow {
		size = "more than 2^64 bytes"
	}
	return fmt.Sprintf("%s needs %s, over the memory budget of %s (--memory-budget sets it)", e.What, size, FormatBytes(e.Limit))
}

// Unwrap makes errors.Is(err, ErrExceeded) hold.
func (e *ExceededError) Unwrap() error { return ErrExceeded }

// Budget is a number of bytes that no one allocation, nor the sum a
// Meter keeps, may exceed. The zero value is the machine's default
// (Default); a Budget is a value and is passed explicitly.
type Budget struct {
	limit uint64
}

// New returns a budget of the given bytes; 0 means the default.
func New(bytes uint64) Budget { return Budget{limit: bytes} }

// Bytes is the limit in bytes.
func (b Budget) Bytes() uint64 {
	if b.limit == 0 {
		return Default().limit
	}
	return b.limit
}

// Resolved is the budget with the default made explicit, so that later
// checks do not read the machine's memory again.
func (b Budget) Resolved() Budget { return Budget{limit: b.Bytes()} }

func (b Budget) String() string { return FormatBytes(b.Bytes()) }

// fallbackBytes is the default where the machine's memory cannot be read.
const fallbackBytes = 4 << 30

// minBytes is the least budget Parse accepts: below it nothing useful
// runs, and a typo such as "8" (bytes) is more likely than intent.
const minBytes = 1 << 20

// Default is half of the machine's memory (MemTotal in /proc/meminfo),
// leaving the rest to the system and to what the budget does not count;
// 4 GiB where that cannot be read.
func Default() Budget {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return Budget{limit: fallbackBytes}
	}
	defer f.Close()
	total, err := memTotal(f)
	if err != nil {
		return Budget{limit: fallbackBytes}
	}
	return Budget{limit: max(total/2, minBytes)}
}

// memTotal reads MemTotal (in kB) from the text of /proc/meminfo.
func memTotal(r io.Reader) (uint64, error) {
	sc := bufio.NewScanner(io.LimitReader(r, 1<<16))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "MemTotal:" && f[2] == "kB" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil || kb == 0 || kb > math.MaxUint64/1024 {
				return 0, fmt.Errorf("MemTotal %q is not a size in kB", f[1])
			}
			return kb * 1024, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no MemTotal line")
}

var units = []struct {
	name  string
	shift uint
}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"TB", 0}, {"GB", 0}, {"MB", 0}, {"KB", 0}, {"B", 0}}

var decimal = map[string]uint64{"TB": 1e12, "GB": 1e9, "MB": 1e6, "KB": 1e3, "B": 1}

// Parse reads a size such as "8GiB", "512MiB", "16GB" or "1073741824";
// binary (KiB…TiB) and decimal (KB…TB) units, a whole number before them.
func Parse(s string) (Budget, error) {
	t := strings.TrimSpace(s)
	mult := uint64(1)
	for _, u := range units {
		if strings.HasSuffix(strings.ToUpper(t), strings.ToUpper(u.name)) {
			t = strings.TrimSpace(t[:len(t)-len(u.name)])
			if m, ok := decimal[u.name]; ok {
				mult = m
			} else {
				mult = 1 << u.shift
			}
			break
		}
	}
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil {
		return Budget{}, fmt.Errorf("size %q: expected a whole number with an optional unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB), such as 8GiB", s)
	}
	hi, v := bits.Mul64(n, mult)
	if hi != 0 {
		return Budget{}, fmt.Errorf("size %q does not fit in 64 bits", s)
	}
	if v < minBytes {
		return Budget{}, fmt.Errorf("size %q is below the least budget, 1MiB", s)
	}
	return Budget{limit: v}, nil
}

// FormatBytes renders a size in the largest binary unit that keeps a
// number of at least 1, with one decimal: 1.5 GiB, 64 GiB, 512 B.
func FormatBytes(n uint64) string {
	for _, u := range units[:4] {
		if n >= 1<<u.shift {
			v := float64(n) / float64(uint64(1)<<u.shift)
			if v == math.Trunc(v) {
				return fmt.Sprintf("%.0f %s", v, u.name)
			}
			return fmt.Sprintf("%.1f %s", v, u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}

// Check refuses bytes past the budget; what names the file or flag and
// the field the size comes from.
func (b Budget) Check(what string, bytes uint64) error {
	if limit := b.Bytes(); bytes > limit {
		return &ExceededError{What: what, Bytes: bytes, Limit: limit}
	}
	return nil
}

// Product multiplies counts (dimensions, copies, bytes per element) with
// overflow checked; ok is false when a count is negative or the product
// does not fit in 64 bits.
func Product(counts ...int) (n uint64, ok bool) {
	zero := false
	for _, c := range counts {
		if c < 0 {
			return 0, false
		}
		zero = zero || c == 0
	}
	if zero {
		return 0, true
	}
	n = 1
	for _, c := range counts {
		hi, lo := bits.Mul64(n, uint64(c))
		if hi != 0 {
			return 0, false
		}
		n = lo
	}
	return n, true
}

// Elements refuses a tensor of the given shape and element size past the
// budget, the product checked for overflow, and returns its bytes.
func (b Budget) Elements(what string, elemBytes int, shape ...int) (uint64, error) {
	n, ok := Product(append([]int{elemBytes}, shape...)...)
	if !ok {
		return 0, &ExceededError{What: what, Overflow: true, Limit: b.Bytes()}
	}
	return n, b.Check(what, n)
}

// Meter sums allocations against one budget: each Take is refused when
// the total so far would pass it. A Meter belongs to one piece of work
// (one model load, one generation) and is not safe for concurrent use.
type Meter struct {
	budget Budget
	used   uint64
}

// NewMeter starts a meter at zero.
func NewMeter(b Budget) *Meter { return &Meter{budget: b.Resolved()} }

// Take adds bytes, or refuses them (adding nothing) when the sum would
// pass the budget; the refusal names what is held already.
func (m *Meter) Take(what string, bytes uint64) error {
	if err := m.budget.Check(what, bytes); err != nil {
		return err
	}
	sum, carry := bits.Add64(m.used, bytes, 0)
	if carry != 0 {
		sum = math.MaxUint64
	}
	if err := m.budget.Check(fmt.Sprintf("%s, with %s held already,", what, FormatBytes(m.used)), sum); err != nil {
		return err
	}
	m.used = sum
	return nil
}

// Used is the sum taken so far.
func (m *Meter) Used() uint64 { return m.used }

// Budget is the meter's budget.
func (m *Meter) Budget() Budget { return m.budget }

// MaxWorkers bounds every --workers flag: each worker holds its own state
// (a Z3 context, a cache of operator results), and more workers than
// cores only share the cores.
const MaxWorkers = 256

// ErrWorkers is what a worker count outside 1..MaxWorkers wraps.
var ErrWorkers = errors.New("workers out of range")

// CheckWorkers refuses a worker count outside 1..MaxWorkers.
func CheckWorkers(workers int) error {
	if workers < 1 || workers > MaxWorkers {
		return fmt.Errorf("%w: %d workers, expected 1 to %d", ErrWorkers, workers, MaxWorkers)
	}
	return nil
}
