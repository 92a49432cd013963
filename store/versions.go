package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
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
	// SameAs, set by Release, is the tag of the earlier version that
	// holds the same rules: the new tag is an alias, and the hash keeps
	// naming the earlier version.
	SameAs string
}

// ErrTampered reports a version whose rules no longer match its hash.
var ErrTampered = errors.New("version does not match its content hash")

var tagPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// MinHashPrefix is the fewest hex digits that name a version by its hash.
const MinHashPrefix = 4

// ErrHashLikeTag is matched (errors.Is) by the refusal of a tag that could
// be read as a hash prefix.
var ErrHashLikeTag = errors.New("tag reads as a hash prefix")

// hashLike reports whether ref could be read as a prefix of a version's
// hash: at least MinHashPrefix characters, all hex digits.
func hashLike(ref string) bool {
	return len(ref) >= MinHashPrefix && strings.Trim(strings.ToLower(ref), "0123456789abcdef") == ""
}

// CheckNewTag reports why tag cannot name a new version: it is malformed,
// could be read as a hash prefix, or is already taken. Commands that do
// long work before releasing call it first.
func (s *Store) CheckNewTag(ctx context.Context, tag string) error {
	return checkNewTag(ctx, s.db, tag)
}

func checkNewTag(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, tag string) error {
	if !tagPattern.MatchString(tag) {
		return fmt.Errorf("version tag %q: use letters, digits, '.', '_' and '-', starting with a letter or digit", tag)
	}
	if hashLike(tag) {
		// A pin by hash must never find another version than the one it
		// was taken from.
		return fmt.Errorf("version tag %q: %d or more hex digits read as a hash prefix, and a hash names one version only; add a letter that is not a-f (such as v%s): %w",
			tag, MinHashPrefix, tag, ErrHashLikeTag)
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

// ruleText is the text a version's content hash covers, "SRC => DST",
// with " if CONDITIONS" for a rule that has them (rules.Text.String).
func ruleText(src, dst, cond string) string {
	return rules.Text{Src: src, Dst: dst, Cond: cond}.String()
}

// Candidate is a rule a release would publish: an unpruned rule whose
// latest proof proves its current text (see Claim), with what the proof
// was decided under. A claim is only a hash anyone can compute, so a
// candidate is published only once its proof was re-established
// (Reestablished).
type Candidate struct {
	Rule     Rule
	AxiomSet string
	Solver   string
	Budget   uint64
	// Core names the axioms the recorded proof used.
	Core []string
	// generator is the configuration of the run that found the rule.
	generator string
}

// Claim is the claim the candidate's proof records.
func (c Candidate) Claim() string {
	return Claim(c.Rule.Text, c.AxiomSet, c.Solver, c.Budget, rules.StatusProved)
}

// Reestablished holds the candidates whose proofs were established again
// from the rules themselves (the prover run again), by rule id, each with
// the Candidate.Claim it was re-established for. Release publishes only
// these: a rule edited after its proof was re-established does not match.
type Reestablished map[int64]string

// ReleaseCandidates lists the rules a release would publish (Candidate),
// ordered by id, and the ids of the unpruned rules that say they are
// proved but have no proof of their current text.
func (s *Store) ReleaseCandidates(ctx context.Context) ([]Candidate, []int64, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, nil, fmt.Errorf("store: release candidates: %w", err)
	}
	defer tx.Rollback()
	cands, leftOut, err := candidates(ctx, tx)
	if err != nil {
		return nil, nil, fmt.Errorf("store: release candidates: %w", err)
	}
	return cands, leftOut, nil
}

// Release freezes the re-established candidates (see Candidate) as
// version tag, with the previous version as parent, and records the
// release as a run; both are written in one transaction, or nothing is.
// A rule counts as proved only through its latest proof: a 'proved'
// verdict whose claim matches the rule's current text, shapes and the
// proof's axiom set, solver and budget, and whose proof re-established
// holds for that same claim. rules.status is not trusted, nor a proof
// whose rule was edited since, nor a claim nobody re-established. Release
// returns the ids of the unpruned rules that say they are proved but are
// not released. It refuses an existing tag and a release with nothing
// proved. Rules an existing version holds already make the new tag an
// alias (Version.SameAs): the hash keeps naming the first version.
func (s *Store) Release(ctx context.Context, tag, toolVersion string, re Reestablished) (Version, []int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Version{}, nil, fmt.Errorf("store: release %s: %w", tag, err)
	}
	defer tx.Rollback()
	if err := checkNewTag(ctx, tx, tag); err != nil {
		return Version{}, nil, err
	}
	cands, leftOut, err := candidates(ctx, tx)
	if err != nil {
		return Version{}, nil, fmt.Errorf("store: release %s: %w", tag, err)
	}
	proved := &releasable{sets: map[string]bool{}, ops: map[string]bool{}, gens: map[string]bool{}, provers: map[string]bool{}}
	for _, c := range cands {
		if claim, ok := re[c.Rule.ID]; !ok || claim != c.Claim() {
			leftOut = append(leftOut, c.Rule.ID)
			continue
		}
		proved.add(c)
	}
	slices.Sort(leftOut)
	if len(proved.ids) == 0 {
		return Version{}, leftOut, fmt.Errorf("release %s: no proved rules to release; run 'rulebook verify' first", tag)
	}
	v := proved.version(tag)
	if v.SameAs, err = sameRules(ctx, tx, v.Hash); err != nil {
		return Version{}, nil, fmt.Errorf("store: release %s: %w", tag, err)
	}
	if err := recordReleaseRun(ctx, tx, v, len(proved.ids)+len(leftOut), toolVersion); err != nil {
		return Version{}, nil, fmt.Errorf("store: release %s: %w", tag, err)
	}
	if err := insertVersion(ctx, tx, &v, proved.ids); err != nil {
		return Version{}, nil, fmt.Errorf("store: release %s: %w", tag, err)
	}
	if err := tx.Commit(); err != nil {
		return Version{}, nil, fmt.Errorf("store: release %s: %w", tag, err)
	}
	return v, leftOut, nil
}

// sameRules is the tag of the first version with this hash, "" if none.
func sameRules(ctx context.Context, tx *sql.Tx, hash string) (string, error) {
	var tag string
	err := tx.QueryRowContext(ctx, `SELECT tag FROM versions WHERE hash = ? ORDER BY id LIMIT 1`, hash).Scan(&tag)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return tag, err
}

// releasable is what a release is made of: its rules and where they came
// from.
type releasable struct {
	ids                      []int64
	texts                    []string
	sets, ops, gens, provers map[string]bool
}

func (p *releasable) add(c Candidate) {
	t := c.Rule.Text
	p.ids, p.texts = append(p.ids, c.Rule.ID), append(p.texts, ruleText(t.Src, t.Dst, t.Cond))
	p.sets[c.AxiomSet], p.provers[ProverName(c.Solver, c.Budget)] = true, true
	p.gens[c.generator] = true
	for _, n := range c.Rule.Operators {
		p.ops[n] = true
	}
}

func (p *releasable) version(tag string) Version {
	return Version{Tag: tag, Hash: ContentHash(p.texts), Rules: len(p.ids), AxiomSets: sortedKeys(p.sets),
		Operators: sortedKeys(p.ops), Generator: sortedKeys(p.gens), Provers: sortedKeys(p.provers), Created: time.Now()}
}

// candidates reads the unpruned rules whose latest proof proves their
// current text, and the ids of those that only say they are proved.
func candidates(ctx context.Context, tx *sql.Tx) ([]Candidate, []int64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+ruleColumns+`,
		coalesce(p.status, ''), coalesce(p.claim, ''), coalesce(p.axiom_set, ''), coalesce(p.solver, ''), coalesce(p.budget, 0), coalesce(p.core, '[]'), u.config
		FROM rules r LEFT JOIN latest_proofs p ON p.rule_id = r.id JOIN runs u ON u.id = r.run_id
		WHERE r.pruned_by IS NULL AND (r.status = 'proved' OR p.status = 'proved') ORDER BY r.id`)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var out []Candidate
	var leftOut []int64
	for rows.Next() {
		var c Candidate
		var budget int64
		var proofStatus rules.Status
		var claim, core string
		r, err := scanRule(rows, &proofStatus, &claim, &c.AxiomSet, &c.Solver, &budget, &core, &c.generator)
		if err != nil {
			return nil, nil, err
		}
		c.Rule, c.Budget = r, uint64(budget)
		if proofStatus != rules.StatusProved || claim != c.Claim() {
			leftOut = append(leftOut, r.ID)
			continue
		}
		if err := json.Unmarshal([]byte(core), &c.Core); err != nil {
			leftOut = append(leftOut, r.ID) // a damaged core vouches for nothing
			continue
		}
		out = append(out, c)
	}
	return out, leftOut, rows.Err()
}

// recordReleaseRun records the release as a finished run: the rules that
// claimed to be proved (candidates) and those released (stored).
func recordReleaseRun(ctx context.Context, tx *sql.Tx, v Version, considered int, toolVersion string) error {
	config, _ := json.Marshal(map[string]any{"tag": v.Tag, "hash": v.Hash})
	now := formatTime(v.Created)
	_, err := tx.ExecContext(ctx, `INSERT INTO runs(command, config, seed, tool_version, started_at, finished_at, status, candidates, stored, host, pid)
		VALUES ('release', ?, 0, ?, ?, ?, 'done', ?, ?, ?, ?)`, string(config), toolVersion, now, now, considered, v.Rules, hostName(), os.Getpid())
	return err
}

// insertVersion writes v, with the version released before it as parent,
// and its rules.
func insertVersion(ctx context.Context, tx *sql.Tx, v *Version, ids []int64) error {
	var parentID sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT id, tag FROM versions ORDER BY id DESC LIMIT 1`).Scan(&parentID, &v.Parent); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	setsJSON, _ := json.Marshal(v.AxiomSets)
	opsJSON, _ := json.Marshal(v.Operators)
	genJSON, _ := json.Marshal(v.Generator)
	proversJSON, _ := json.Marshal(v.Provers)
	res, err := tx.ExecContext(ctx, `INSERT INTO versions(tag, hash, rules, axiom_sets, operators, generator, provers, parent_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, v.Tag, v.Hash, v.Rules, string(setsJSON), string(opsJSON), string(genJSON), string(proversJSON), parentID, formatTime(v.Created))
	if err != nil {
		return err
	}
	if v.ID, err = res.LastInsertId(); err != nil {
		return err
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO version_rules(version_id, rule_id) VALUES (?, ?)`)
	if err != nil {
		return err
	}
	defer ins.Close()
	for _, id := range ids {
		if _, err := ins.ExecContext(ctx, v.ID, id); err != nil {
			return err
		}
	}
	return nil
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
	rows, err := s.db.QueryContext(ctx, `SELECT r.src, r.dst, r.cond FROM version_rules vr JOIN rules r ON r.id = vr.rule_id WHERE vr.version_id = ?`, v.ID)
	if err != nil {
		return v, nil, fmt.Errorf("store: version %s: %w", v.Tag, err)
	}
	defer rows.Close()
	var texts []string
	for rows.Next() {
		var src, dst, cond string
		if err := rows.Scan(&src, &dst, &cond); err != nil {
			return v, nil, fmt.Errorf("store: version %s: %w", v.Tag, err)
		}
		texts = append(texts, ruleText(src, dst, cond))
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

// findVersion finds a version by hash prefix, then by tag: a hash always
// wins, so that a tag made to look like a hash (allowed before tags that
// read as hash prefixes were refused) cannot redirect a pin.
func (s *Store) findVersion(ctx context.Context, ref string) (Version, error) {
	q := `SELECT ` + versionColumns + ` FROM versions v LEFT JOIN versions p ON p.id = v.parent_id `
	if hashLike(ref) {
		v, found, err := s.findByHash(ctx, q, ref)
		if err != nil || found {
			return v, err
		}
	}
	v, err := scanVersion(s.db.QueryRowContext(ctx, q+`WHERE v.tag = ?`, ref))
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return v, fmt.Errorf("store: version %s: %w", ref, err)
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

// findByHash finds the one version whose hash starts with prefix.
func (s *Store) findByHash(ctx context.Context, q, prefix string) (Version, bool, error) {
	rows, err := s.db.QueryContext(ctx, q+`WHERE v.hash LIKE ? || '%' ORDER BY v.id`, strings.ToLower(prefix))
	if err != nil {
		return Version{}, false, fmt.Errorf("store: version %s: %w", prefix, err)
	}
	defer rows.Close()
	var found []Version
	for rows.Next() {
		fv, err := scanVersion(rows)
		if err != nil {
			return Version{}, false, fmt.Errorf("store: version %s: %w", prefix, err)
		}
		found = append(found, fv)
	}
	if err := rows.Err(); err != nil {
		return Version{}, false, fmt.Errorf("store: version %s: %w", prefix, err)
	}
	if len(found) == 0 {
		return Version{}, false, nil
	}
	// Versions with one hash hold the same rules (later tags are aliases,
	// see Release): the hash names the first.
	for _, fv := range found[1:] {
		if fv.Hash != found[0].Hash {
			return Version{}, false, fmt.Errorf("hash prefix %s matches %d versions; give more digits", prefix, len(found))
		}
	}
	return found[0], true, nil
}

// VersionRules loads a version, hash-checked, with its full rule records,
// ordered by canonical text.
func (s *Store) VersionRules(ctx context.Context, ref string) (Version, []Rule, error) {
	v, _, err := s.LoadVersion(ctx, ref)
	if err != nil {
		return v, nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+ruleColumns+` FROM version_rules vr JOIN rules r ON r.id = vr.rule_id
		WHERE vr.version_id = ? ORDER BY r.src || ' => ' || r.dst, r.cond`, v.ID)
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
