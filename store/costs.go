package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// OpCost is the measured time of one operator configuration on one device.
// Shapes and Params are the runtime's canonical renderings, so that the
// optimizer finds a measurement by the same strings.
type OpCost struct {
	Device, Operator, Shapes, Params string
	Median                           time.Duration
	Repeats                          int
	RunID                            int64
	MeasuredAt                       time.Time
}

// RecordCosts stores measurements in one transaction; a configuration
// measured before on the same device is replaced.
func (s *Store) RecordCosts(ctx context.Context, costs []OpCost) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: record costs: %w", err)
	}
	defer tx.Rollback()
	ins, err := tx.PrepareContext(ctx, `INSERT INTO op_costs(device, operator, shapes, params, median_ms, repeats, run_id, measured_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(device, operator, shapes, params) DO UPDATE SET
			median_ms = excluded.median_ms, repeats = excluded.repeats, run_id = excluded.run_id, measured_at = excluded.measured_at`)
	if err != nil {
		return fmt.Errorf("store: record costs: %w", err)
	}
	defer ins.Close()
	for _, c := range costs {
		ms := float64(c.Median) / float64(time.Millisecond)
		if _, err := ins.ExecContext(ctx, c.Device, c.Operator, c.Shapes, c.Params, ms, c.Repeats, c.RunID, formatTime(c.MeasuredAt)); err != nil {
			return fmt.Errorf("store: record cost of %s %s on %s: %w", c.Operator, c.Shapes, c.Device, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: record costs: %w", err)
	}
	return nil
}

// Cost looks up one configuration's measurement; ok is false when it was
// never measured on that device.
func (s *Store) Cost(ctx context.Context, device, operator, shapes, params string) (c OpCost, ok bool, err error) {
	row := s.db.QueryRowContext(ctx, `SELECT device, operator, shapes, params, median_ms, repeats, run_id, measured_at
		FROM op_costs WHERE device = ? AND operator = ? AND shapes = ? AND params = ?`, device, operator, shapes, params)
	c, err = scanCost(row)
	if errors.Is(err, sql.ErrNoRows) {
		return OpCost{}, false, nil
	}
	if err != nil {
		return OpCost{}, false, fmt.Errorf("store: cost of %s %s on %s: %w", operator, shapes, device, err)
	}
	return c, true, nil
}

// Costs lists every measurement on a device, by operator, shapes and
// parameters.
func (s *Store) Costs(ctx context.Context, device string) ([]OpCost, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT device, operator, shapes, params, median_ms, repeats, run_id, measured_at
		FROM op_costs WHERE device = ? ORDER BY operator, shapes, params`, device)
	if err != nil {
		return nil, fmt.Errorf("store: costs on %s: %w", device, err)
	}
	defer rows.Close()
	var out []OpCost
	for rows.Next() {
		c, err := scanCost(rows)
		if err != nil {
			return nil, fmt.Errorf("store: costs on %s: %w", device, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func scanCost(sc interface{ Scan(...any) error }) (OpCost, error) {
	var c OpCost
	var ms float64
	var at string
	if err := sc.Scan(&c.Device, &c.Operator, &c.Shapes, &c.Params, &ms, &c.Repeats, &c.RunID, &at); err != nil {
		return OpCost{}, err
	}
	c.Median = time.Duration(ms * float64(time.Millisecond))
	t, err := time.Parse(timeFormat, at)
	if err != nil {
		return OpCost{}, fmt.Errorf("measured_at %q: %w", at, err)
	}
	c.MeasuredAt = t
	return c, nil
}
