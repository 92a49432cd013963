package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestDiffTexts(t *testing.T) {
	added, removed := DiffTexts([]string{"a", "b", "d"}, []string{"b", "c", "d", "e"})
	if !slices.Equal(added, []string{"c", "e"}) || !slices.Equal(removed, []string{"a"}) {
		t.Errorf("added %v, removed %v", added, removed)
	}
}

func TestAxiomComments(t *testing.T) {
	a := AxiomSet{Text: "ewadd-comm\tewadd commutes\t(forall ...)\nbroken line\nrelu-idem\t\t(forall ...)\n"}
	got := a.Comments()
	if len(got) != 2 || got["ewadd-comm"] != "ewadd commutes" || got["relu-idem"] != "" {
		t.Errorf("comments %q", got)
	}
}

// EndRun records how a run ended: done, interrupted by a cancelled
// context (even though that context is cancelled), or failed.
func TestEndRun(t *testing.T) {
	s := openTemp(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		err  error
		want string
	}{
		{nil, RunDone},
		{fmt.Errorf("insert: %w", context.Canceled), RunInterrupted},
		{errors.New("disk full"), RunFailed},
	}
	for _, c := range cases {
		id, err := s.BeginRun(context.Background(), "test", "{}", 0, "test")
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if errors.Is(c.err, context.Canceled) {
			ctx = cancelled
		}
		if got := s.EndRun(ctx, Run{ID: id, Status: RunDone}, c.err); got != c.err {
			t.Errorf("EndRun returned %v, want %v", got, c.err)
		}
	}
	runs, err := s.Runs(context.Background())
	if err != nil || len(runs) != len(cases) {
		t.Fatalf("runs %+v (%v)", runs, err)
	}
	for i, c := range cases {
		if runs[i].Status != c.want || runs[i].FinishedAt == nil {
			t.Errorf("run %d ended with %v: status %q, finished %v; want %q", i, c.err, runs[i].Status, runs[i].FinishedAt, c.want)
		}
	}
}
