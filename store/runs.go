package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Run statuses.
const (
	RunRunning     = "running"
	RunDone        = "done"
	RunInterrupted = "interrupted"
	RunFailed      = "failed"
)

// Run is one invocation of a command that writes to the store (provenance).
type Run struct {
	ID          int64
	Command     string // e.g. "generate"
	Config      string // JSON text
	Seed        uint64
	ToolVersion string
	StartedAt   time.Time
	FinishedAt  *time.Time
	Status      string // "running", "done", "interrupted", "failed"

	Graphs, Classes, Collisions, Candidates, Stored int64
}

// BeginRun records the start of a run with status "running" and returns its id.
func (s *Store) BeginRun(ctx context.Context, command, config string, seed uint64, toolVersion string) (int64, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO runs(command, config, seed, tool_version, started_at, status)
		VALUES (?, ?, ?, ?, ?, 'running')`,
		command, config, int64(seed), toolVersion, formatTime(time.Now()))
	if err != nil {
		return 0, fmt.Errorf("store: begin run: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("store: begin run: %w", err)
	}
	return id, nil
}

// FinishRun records the end status and counts of run r.ID. It is its own
// small transaction, so an interrupted run can still be marked "interrupted"
// after its main transaction rolled back. A nil r.FinishedAt means now.
// Command, Config, Seed, ToolVersion and StartedAt are not changed.
func (s *Store) FinishRun(ctx context.Context, r Run) error {
	switch r.Status {
	case RunRunning, RunDone, RunInterrupted, RunFailed:
	default:
		return fmt.Errorf("store: finish run %d: invalid status %q", r.ID, r.Status)
	}
	finished := time.Now()
	if r.FinishedAt != nil {
		finished = *r.FinishedAt
	}
	res, err := s.db.ExecContext(ctx, `UPDATE runs SET finished_at = ?, status = ?,
		graphs = ?, classes = ?, collisions = ?, candidates = ?, stored = ? WHERE id = ?`,
		formatTime(finished), r.Status, r.Graphs, r.Classes, r.Collisions, r.Candidates, r.Stored, r.ID)
	if err != nil {
		return fmt.Errorf("store: finish run %d: %w", r.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: finish run %d: %w", r.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("store: finish run %d: %w", r.ID, &notFoundError{"run", r.ID})
	}
	return nil
}

// Runs returns all runs ordered by id.
func (s *Store) Runs(ctx context.Context) ([]Run, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, command, config, seed, tool_version, started_at,
		finished_at, status, graphs, classes, collisions, candidates, stored FROM runs ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("store: runs: %w", err)
	}
	defer rows.Close()
	var runs []Run
	for rows.Next() {
		var (
			r        Run
			seed     int64
			started  string
			finished sql.NullString
		)
		if err := rows.Scan(&r.ID, &r.Command, &r.Config, &seed, &r.ToolVersion, &started,
			&finished, &r.Status, &r.Graphs, &r.Classes, &r.Collisions, &r.Candidates, &r.Stored); err != nil {
			return nil, fmt.Errorf("store: runs: %w", err)
		}
		r.Seed = uint64(seed)
		if r.StartedAt, err = time.Parse(time.RFC3339Nano, started); err != nil {
			return nil, fmt.Errorf("store: runs: run %d: started_at: %w", r.ID, err)
		}
		if finished.Valid {
			t, err := time.Parse(time.RFC3339Nano, finished.String)
			if err != nil {
				return nil, fmt.Errorf("store: runs: run %d: finished_at: %w", r.ID, err)
			}
			r.FinishedAt = &t
		}
		runs = append(runs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: runs: %w", err)
	}
	return runs, nil
}

// notFoundError reads "rule 17 not found" and matches sql.ErrNoRows.
type notFoundError struct {
	what string
	id   int64
}

func (e *notFoundError) Error() string { return fmt.Sprintf("%s %d not found", e.what, e.id) }
func (e *notFoundError) Unwrap() error { return sql.ErrNoRows }
