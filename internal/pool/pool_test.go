package pool

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
)

var errItem = errors.New("item failed")

// TestEach checks that every item runs once on a worker below the count,
// and that the error returned is the lowest failing item's, whatever the
// timing.
func TestEach(t *testing.T) {
	for _, tc := range []struct {
		workers, n int
		fail       map[int]bool
		want       string // the error, "" for none
	}{
		{workers: 4, n: 100},
		{workers: 1, n: 7},
		{workers: 8, n: 3},
		{workers: 0, n: 5}, // at least one worker
		{workers: 3, n: 0},
		{workers: 4, n: 200, fail: map[int]bool{150: true, 40: true, 41: true}, want: "item 40: item failed"},
		{workers: 1, n: 10, fail: map[int]bool{9: true}, want: "item 9: item failed"},
	} {
		t.Run(fmt.Sprintf("%d workers %d items", tc.workers, tc.n), func(t *testing.T) {
			ran := make([]atomic.Int32, tc.n)
			err := Each(context.Background(), tc.workers, tc.n, func(w, i int) error {
				if w < 0 || w >= max(tc.workers, 1) {
					t.Errorf("item %d on worker %d of %d", i, w, tc.workers)
				}
				ran[i].Add(1)
				if tc.fail[i] {
					return fmt.Errorf("item %d: %w", i, errItem)
				}
				return nil
			})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Each: %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want || !errors.Is(err, errItem)):
				t.Fatalf("Each returned %v, want %s", err, tc.want)
			case tc.want != "":
				return // items past the failure may not run
			}
			for i := range ran {
				if n := ran[i].Load(); n != 1 {
					t.Errorf("item %d ran %d times", i, n)
				}
			}
		})
	}
}

// A cancelled context starts no more items and is the error returned.
func TestEachCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var ran atomic.Int32
	err := Each(ctx, 2, 1000, func(_, i int) error {
		if ran.Add(1) == 10 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Each returned %v, want context.Canceled", err)
	}
	if n := ran.Load(); n >= 1000 {
		t.Errorf("all %d items ran after the cancel", n)
	}
}
