package enumerate

import (
	"errors"
	"fmt"
	"math"

	"rulebook/internal/budget"
	"rulebook/rules"
)

// MaxWorkers bounds Config.Workers (budget.MaxWorkers).
const MaxWorkers = budget.MaxWorkers

// ErrWorkers is what a worker count outside 1..MaxWorkers wraps.
var ErrWorkers = budget.ErrWorkers

// workerBytes is what one worker holds besides its cache (its value
// table, use counts and the records it has not handed over).
const workerBytes = 1 << 20

// memoShare is the part of the budget left after the input pools that
// the workers' caches may take together; the rest is for the values one
// graph computes, the classes and the records.
const memoShare = 2

// CheckMemory refuses, before any work, a generation whose input pool at
// some degree, or whose workers, do not fit in cfg.Memory. At degree d
// the parallel pool holds tensors of d³ elements and more (partial sums
// multiply them by d), so the degrees a budget allows are far below
// rules.MaxDegree: at 8 GiB, up to 128.
func CheckMemory(cfg Config) error {
	if err := CheckWorkers(cfg.Workers, cfg.Memory); err != nil {
		return err
	}
	return CheckDegrees(cfg.Registry, cfg.Degrees, cfg.Memory)
}

// CheckWorkers refuses a worker count outside 1..MaxWorkers, or one whose
// fixed state alone passes the budget.
func CheckWorkers(workers int, mem budget.Budget) error {
	if err := budget.CheckWorkers(workers); err != nil {
		return err
	}
	_, err := mem.Elements(fmt.Sprintf("%d workers", workers), workerBytes, workers)
	return err
}

// CheckDegrees refuses degrees whose input pool passes the budget; a set
// without degree parameters has nothing to check.
func CheckDegrees(reg *rules.Registry, degrees []int, mem budget.Budget) error {
	if !reg.HasDegreeParams() {
		return nil
	}
	if degrees == nil {
		degrees = []int{rules.BaseDegree}
	}
	mem = mem.Resolved()
	for _, d := range degrees {
		p := rules.ParallelPool(d)
		if _, err := poolBytes(mem, p, d); err != nil {
			return err
		}
		if w := poolWork(p); w > MaxEvalWork {
			return fmt.Errorf("%w: degree %d: a linear over its largest input does %d multiply-adds, more than %d", ErrDegreeWork, d, w, MaxEvalWork)
		}
	}
	return nil
}

// MaxEvalWork bounds the multiply-adds of one operator over the parallel
// pool's largest input: an evaluation is not interruptible, so past it
// Ctrl-C would wait for seconds. Degree 48 is within it, 64 is not.
const MaxEvalWork = 1 << 29

// ErrDegreeWork is what a degree past MaxEvalWork wraps.
var ErrDegreeWork = errors.New("degree too large to evaluate")

// poolWork is the multiply-adds of a linear contracting the last
// dimension of the pool's largest input, partial sums and copies each
// whole.
func poolWork(p rules.Pool) uint64 {
	var most uint64
	for _, c := range p.Classes {
		s := c.Shape
		if s.Rank == 0 {
			continue
		}
		w, ok := budget.Product(s.Size(), s.SumDegree(), c.Copies, s.Dims[s.Rank-1])
		if !ok {
			return math.MaxUint64
		}
		most = max(most, w)
	}
	return most
}

// poolBytes is the memory of a pool's integer inputs, refused past the
// budget; what the refusal names is the degree and the largest tensor.
func poolBytes(mem budget.Budget, p rules.Pool, degree int) (uint64, error) {
	total, largest := uint64(0), ""
	for _, c := range p.Classes {
		n, ok := budget.Product(append(c.Shape.Dims[:c.Shape.Rank:c.Shape.Rank], c.Shape.SumDegree(), c.Copies, 4)...)
		sum := total + n
		if !ok || sum < total {
			return 0, &budget.ExceededError{What: fmt.Sprintf("the input pool at degree %d", degree), Overflow: true, Limit: mem.Bytes()}
		}
		if largest == "" || c.Shape.SumDegree() > 1 {
			largest = fmt.Sprintf("%v in %d partial sums", c.Shape.Dims[:c.Shape.Rank], c.Shape.SumDegree())
		}
		total = sum
	}
	what := fmt.Sprintf("the input pool at degree %d (%d classes, tensors up to %s)", degree, len(p.Classes), largest)
	return total, mem.Check(what, total)
}

// memoBytes is the size of each worker's cache of operator results: an
// equal part of what the budget leaves after the pool.
func memoBytes(mem budget.Budget, pool uint64, workers int) uint64 {
	left := mem.Bytes() - min(pool, mem.Bytes())
	return left / memoShare / uint64(max(workers, 1))
}

// CheckBudget refuses workers and degrees that do not fit in mem, naming
// the flag to change.
func CheckBudget(reg *rules.Registry, degrees []int, workers int, mem budget.Budget) error {
	if err := CheckWorkers(workers, mem); err != nil {
		return fmt.Errorf("--workers: %w", err)
	}
	if err := CheckDegrees(reg, degrees, mem); err != nil {
		return fmt.Errorf("--degrees: %w", err)
	}
	return nil
}
