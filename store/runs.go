package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"time"
)

// Run statuses. A run is abandoned when it was left running by a process
// that is gone: killed, or its machine stopped.
const (
	RunRunning     = "running"
	RunDone        = "done"
	RunInterrupted = "interrupted"
	RunFailed      = "failed"
	RunAbandoned   = "abandoned"
)

// pollInterval is how often a run waiting for another looks again.
const pollInterval = 200 * time.Millisecond

// Run is one invocation of a command that writes to the store (provenance).
type Run struct {
	ID          int64
	Command     string // e.g. "generate"
	Config      string // JSON text
	Seed        uint64
	ToolVersion string
	StartedAt   time.Time
	FinishedAt  *time.Time
	Status      string // "running", "done", "interrupted", "failed", "abandoned"

	Graphs, Classes, Collisions, Candidates, Stored int64

	// Host and PID name the process that ran it (schema v8; "" and 0
	// before).
	Host string
	PID  int
}

// hostName names this machine in runs; "" when the system will not say.
func hostName() string {
	h, _ := os.Hostname()
	return h
}

// BeginRun records the start of a run with status "running", by this
// process on this host, and returns its id.
func (s *Store) BeginRun(ctx context.Context, command, config string, seed uint64, toolVersion string) (int64, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO runs(command, config, seed, tool_version, started_at, status, host, pid)
		VALUES (?, ?, ?, ?, ?, 'running', ?, ?)`,
		command, config, int64(seed), toolVersion, formatTime(time.Now()), hostName(), os.Getpid())
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
	case RunRunning, RunDone, RunInterrupted, RunFailed, RunAbandoned:
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

// Runs returns all runs ordered by id. Runs whose process is gone were
// marked abandoned when the store was opened.
func (s *Store) Runs(ctx context.Context) ([]Run, error) {
	runs, err := queryRuns(ctx, s.db, "ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("store: runs: %w", err)
	}
	return runs, nil
}

const runColumns = `id, command, config, seed, tool_version, started_at,
	finished_at, status, graphs, classes, collisions, candidates, stored, host, pid`

// queryRuns reads the runs that the clause (WHERE …, ORDER BY …) selects.
func queryRuns(ctx context.Context, db *sql.DB, clause string, args ...any) ([]Run, error) {
	rows, err := db.QueryContext(ctx, `SELECT `+runColumns+` FROM runs `+clause, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var runs []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, rows.Err()
}

func scanRun(sc interface{ Scan(...any) error }) (Run, error) {
	var (
		r        Run
		seed     int64
		started  string
		finished sql.NullString
	)
	if err := sc.Scan(&r.ID, &r.Command, &r.Config, &seed, &r.ToolVersion, &started,
		&finished, &r.Status, &r.Graphs, &r.Classes, &r.Collisions, &r.Candidates, &r.Stored, &r.Host, &r.PID); err != nil {
		return r, err
	}
	r.Seed = uint64(seed)
	var err error
	if r.StartedAt, err = time.Parse(time.RFC3339Nano, started); err != nil {
		return r, fmt.Errorf("run %d: started_at: %w", r.ID, err)
	}
	if finished.Valid {
		t, err := time.Parse(time.RFC3339Nano, finished.String)
		if err != nil {
			return r, fmt.Errorf("run %d: finished_at: %w", r.ID, err)
		}
		r.FinishedAt = &t
	}
	return r, nil
}

// markAbandoned marks the runs left 'running' by a process of this host
// that is gone. Runs of other hosts cannot be told from live ones and keep
// their status; so do runs recorded before schema v8, which name no
// process.
func markAbandoned(ctx context.Context, db *sql.DB) error {
	running, err := queryRuns(ctx, db, "WHERE status = 'running' AND pid > 0 AND host = ?", hostName())
	if err != nil {
		return fmt.Errorf("look for abandoned runs: %w", err)
	}
	for _, r := range running {
		if !processGone(r.PID, r.StartedAt) {
			continue
		}
		if _, err := db.ExecContext(ctx, `UPDATE runs SET status = 'abandoned' WHERE id = ? AND status = 'running'`, r.ID); err != nil {
			return fmt.Errorf("mark run %d abandoned: %w", r.ID, err)
		}
	}
	return nil
}

// AwaitEarlierRuns waits until no run of command older than run is still
// running, so that two processes do not do the same work at once (two
// verifications of one database would prove each rule twice). A run
// whose process is gone is marked abandoned rather than waited for.
// waiting, if not nil, hears of the first run waited for.
func (s *Store) AwaitEarlierRuns(ctx context.Context, run int64, command string, waiting func(Run)) error {
	announced := false
	for {
		if err := markAbandoned(ctx, s.db); err != nil {
			return fmt.Errorf("store: %w", err)
		}
		earlier, err := queryRuns(ctx, s.db, "WHERE command = ? AND status = 'running' AND id < ? ORDER BY id LIMIT 1", command, run)
		if err != nil {
			return fmt.Errorf("store: runs: %w", err)
		}
		if len(earlier) == 0 {
			return nil
		}
		if !announced && waiting != nil {
			waiting(earlier[0])
		}
		announced = true
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// notFoundError reads "rule 17 not found" and matches sql.ErrNoRows.
type notFoundError struct {
	what string
	id   int64
}

func (e *notFoundError) Error() string { return fmt.Sprintf("%s %d not found", e.what, e.id) }
func (e *notFoundError) Unwrap() error { return sql.ErrNoRows }
