package store

import (
	"context"
	"errors"
)

// EndRun records how a run ended and returns err: as run says when err is
// nil, else interrupted or failed (see EndStatus). It records even after
// ctx is cancelled, as by Ctrl-C; when recording fails and err is nil,
// the recording's error comes back instead.
func (s *Store) EndRun(ctx context.Context, run Run, err error) error {
	if err != nil {
		run.Status = EndStatus(err)
	}
	if ferr := s.FinishRun(context.WithoutCancel(ctx), run); ferr != nil && err == nil {
		err = ferr
	}
	return err
}

// EndStatus is how a run that stopped with err is recorded: interrupted
// when its context was cancelled or ran out of time, failed otherwise.
func EndStatus(err error) string {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return RunInterrupted
	}
	return RunFailed
}
