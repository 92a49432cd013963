package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"rulebook/rules"
)

// Version is a released, immutable rule set.
type Version struct {
	ID        int64
	Tag       string
	Hash      string // SHA-256 over the sorted canonical rule texts
	Rules     int
	AxiomSets []string
	Operators []string
	Generator []string // the configurations of the runs that found the rules
	// Provers names the solvers and budgets the rules were proved under
	// (Proof.Prover): with the axiom sets and the generator, what it takes
	// to rebuild the version.
	Provers []string
	Parent  string // the tag released before this one, "" for the first
	Created time.Time
}

// ErrTampered reports a version whose rules no longer match its hash.
var ErrTampered = errors.New("version does not match its content hash")

var tagPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// CheckNewTag reports why tag cannot name a new version: it is malformed or
// already taken. Commands that do long work before releasing call it first.
func (s *Store) CheckNewTag(ctx context.Context, tag string) error {
	return checkNewTag(ctx, s.db, tag)
}

func checkNewTag(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, tag string) error {
	if !tagPattern.MatchString(tag) {
		return fmt.Errorf("version tag %q: use letters, digits, '.', '_' and '-', starting with a letter or digit", tag)
	}
	var exists int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM versions WHERE tag = ?`, tag).Scan(&exists); err != nil {
		return fmt.Errorf("store: release %s: %w", tag, err)
	}
	if exists > 0 {
		return fmt.Errorf("version %s already exists; released versions never change, choose another tag", tag)
	}
	return nil
}

// NextTag is the first of v1, v2, … that no version uses.
func (s *Store) NextTag(ctx context.Context) (string, error) {
	for k := 1; ; k++ {
		tag := fmt.Sprintf("v%d", k)
		var exists int
		if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM versions WHERE tag = ?`, tag).Scan(&exists); err != nil {
			return "", fmt.Errorf("store: next tag: %w", err)
		}
		if exists == 0 {
			return tag, nil
		}
	}
}

// ContentHash is the identity of a rule set: SHA-256 of its canonical texts,
// sorted, one per line. Two databases holding the same rules agree on it.
func ContentHash(texts []string) string {
	sorted := slices.Clone(texts)
	slices.Sort(sorted)
	h := sha256.New()
	for _, t := range sorted {
		h.Write([]byte(t))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ruleText is the text a version's content hash covers, "SRC => DST".
func ruleText(src, dst string) string { return rules.Text{Src: src, Dst: dst}.String() }

// Release freezes every proved, unpruned rule as version tag, with the
// previous version as parent. It refuses an existing tag and a release with nothing
// proved.
func (s *Store) Release(ctx context.Context, tag string) (Version, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Version{}, fmt.Errorf("store: release %s: %w", tag, err)
	}
	defer tx.Rollback()
	if err := checkNewTag(ctx, tx, tag); err != nil {
		return Version{}, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT r.id, r.src, r.dst, p.axiom_set, p.solver, p.budget, u.config,
		(SELECT json_group_array(o.operator) FROM rule_operators o WHERE o.rule_id = r.id)
		FROM rules r JOIN latest_proofs p ON p.rule_id = r.id JOIN runs u ON u.id = r.run_id
		WHERE r.status = 'proved' AND r.pruned_by IS NULL ORDER BY r.id`)
	if err != nil {
		return Version{}, fmt.Errorf("store: release %s: %w", tag, err)
	}
	var ids []int64
	var texts []string
	sets, ops, gens, provers := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for rows.Next() {
		var id, budget int64
		var src, dst, set, solver, gen, opsJSON string
		if err := rows.Scan(&id, &src, &dst, &set, &solver, &budget, &gen, &opsJSON); err != nil {
			rows.Close()
			return Version{}, fmt.Errorf("store: release %s: %w", tag, err)
		}
		ids, texts = append(ids, id), append(texts, ruleText(src, dst))
		sets[set], gens[gen], provers[ProverName(solver, uint64(budget))] = true, true, true
		var names []string
		_ = json.Unmarshal([]byte(opsJSON), &names)
		for _, n := range names {
			ops[n] = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Version{}, fmt.Errorf("store: release %s: %w", tag, err)
	}
	if len(ids) == 0 {
		return Version{}, fmt.Errorf("release %s: no proved rules to release; run 'rulebook verify' first", tag)
	}
	v := Version{Tag: tag, Hash: ContentHash(texts), Rules: len(ids),
		AxiomSets: sortedKeys(sets), Operators: sortedKeys(ops), Generator: sortedKeys(gens), Provers: sortedKeys(provers), Created: time.Now()}
	var parentID sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT id, tag FROM versions ORDER BY id DESC LIMIT 1`).Scan(&parentID, &v.Parent); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Version{}, fmt.Errorf("store: release %s: %w", tag, err)
	}
	setsJSON, _ := json.Marshal(v.AxiomSets)
	opsJSON, _ := json.Marshal(v.Operators)
	genJSON, _ := json.Marshal(v.Generator)
	proversJSON, _ := json.Marshal(v.Provers)
	res, err := tx.ExecContext(ctx, `INSERT INTO versions(tag, hash, rules, axiom_sets, operators, generator, provers, parent_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, tag, v.Hash, v.Rules, string(setsJSON), string(opsJSON), string(genJSON), string(proversJSON), parentID, formatTime(v.Created))
	if err != nil {
		return Version{}, fmt.Errorf("store: release %s: %w", tag, err)
	}
	if v.ID, err = res.LastInsertId(); err != nil {
		return Version{}, fmt.Errorf("store: release %s: %w", tag, err)
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO version_rules(version_id, rule_id) VALUES (?, ?)`)
	if err != nil {
		return Version{}, fmt.Errorf("store: release %s: %w", tag, err)
	}
	for _, id := range ids {
		if _, err := ins.ExecContext(ctx, v.ID, id); err != nil {
			return Version{}, fmt.Errorf("store: release %s: %w", tag, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return Version{}, fmt.Errorf("store: release %s: %w", tag, err)
	}
	return v, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

const versionColumns = `v.id, v.tag, v.hash, v.rules, v.axiom_sets, v.operators, v.generator, v.provers, coalesce(p.tag, ''), v.created_at`

func scanVersion(sc interface{ Scan(...any) error }) (Version, error) {
	var v Version
	var sets, ops, gen, provers, created string
	if err := sc.Scan(&v.ID, &v.Tag, &v.Hash, &v.Rules, &sets, &ops, &gen, &provers, &v.Parent, &created); err != nil {
		return v, err
	}
	_ = json.Unmarshal([]byte(sets), &v.AxiomSets)
	_ = json.Unmarshal([]byte(ops), &v.Operators)
	_ = json.Unmarshal([]byte(gen), &v.Generator)
	_ = json.Unmarshal([]byte(provers), &v.Provers)
	v.Created, _ = time.Parse(timeFormat, created)
	return v, nil
}

// Versions lists the released versions, oldest first.
func (s *Store) Versions(ctx context.Context) ([]Version, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+versionColumns+` FROM versions v LEFT JOIN versions p ON p.id = v.parent_id ORDER BY v.id`)
	if err != nil {
		return nil, fmt.Errorf("store: versions: %w", err)
	}
	defer rows.Close()
	var out []Version
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			return nil, fmt.Errorf("store: versions: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// LoadVersion finds a version by tag or by a prefix (≥ 4 hex digits) of
// its hash, re-computes its content hash from its rules and returns the
// rules' canonical texts, sorted. A version whose rules changed is refused.
func (s *Store) LoadVersion(ctx context.Context, ref string) (Version, []string, error) {
	v, err := s.findVersion(ctx, ref)
	if err != nil {
		return v, nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT r.src, r.dst FROM version_rules vr JOIN rules r ON r.id = vr.rule_id WHERE vr.version_id = ?`, v.ID)
	if err != nil {
		return v, nil, fmt.Errorf("store: version %s: %w", v.Tag, err)
	}
	defer rows.Close()
	var texts []string
	for rows.Next() {
		var src, dst string
		if err := rows.Scan(&src, &dst); err != nil {
			return v, nil, fmt.Errorf("store: version %s: %w", v.Tag, err)
		}
		texts = append(texts, ruleText(src, dst))
	}
	if err := rows.Err(); err != nil {
		return v, nil, fmt.Errorf("store: version %s: %w", v.Tag, err)
	}
	if got := ContentHash(texts); got != v.Hash || len(texts) != v.Rules {
		return v, nil, fmt.Errorf("version %s was changed outside rulebook: it records %d rules with hash %.12s…, its rules now hash to %.12s… (%d rules): %w",
			v.Tag, v.Rules, v.Hash, got, len(texts), ErrTampered)
	}
	slices.Sort(texts)
	return v, texts, nil
}

func (s *Store) findVersion(ctx context.Context, ref string) (Version, error) {
	q := `SELECT ` + versionColumns + ` FROM versions v LEFT JOIN versions p ON p.id = v.parent_id `
	v, err := scanVersion(s.db.QueryRowContext(ctx, q+`WHERE v.tag = ?`, ref))
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return v, fmt.Errorf("store: version %s: %w", ref, err)
	}
	if len(ref) >= 4 && strings.Trim(strings.ToLower(ref), "0123456789abcdef") == "" {
		rows, err := s.db.QueryContext(ctx, q+`WHERE v.hash LIKE ? || '%'`, strings.ToLower(ref))
		if err != nil {
			return v, fmt.Errorf("store: version %s: %w", ref, err)
		}
		defer rows.Close()
		var found []Version
		for rows.Next() {
			fv, err := scanVersion(rows)
			if err != nil {
				return v, fmt.Errorf("store: version %s: %w", ref, err)
			}
			found = append(found, fv)
		}
		switch len(found) {
		case 1:
			return found[0], nil
		case 0:
		default:
			return v, fmt.Errorf("hash prefix %s matches %d versions; give more digits", ref, len(found))
		}
	}
	tags, _ := s.Versions(ctx)
	var names []string
	for _, t := range tags {
		names = append(names, t.Tag)
	}
	if len(names) == 0 {
		return v, fmt.Errorf("unknown version %q: nothing has been released yet ('rulebook release TAG')", ref)
	}
	return v, fmt.Errorf("unknown version %q (released: %s)", ref, strings.Join(names, ", "))
}

// VersionRules loads a version, hash-checked, with its full rule records,
// ordered by canonical text.
func (s *Store) VersionRules(ctx context.Context, ref string) (Version, []Rule, error) {
	v, _, err := s.LoadVersion(ctx, ref)
	if err != nil {
		return v, nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+ruleColumns+` FROM version_rules vr JOIN rules r ON r.id = vr.rule_id
		WHERE vr.version_id = ? ORDER BY r.src || ' => ' || r.dst`, v.ID)
	if err != nil {
		return v, nil, fmt.Errorf("store: version %s: %w", v.Tag, err)
	}
	defer rows.Close()
	var out []Rule
	for rows.Next() {
		r, err := scanRule(rows)
		if err != nil {
			return v, nil, fmt.Errorf("store: version %s: %w", v.Tag, err)
		}
		out = append(out, r)
	}
	return v, out, rows.Err()
}
