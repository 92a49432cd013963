package store

// SchemaVersion is the newest schema this build knows. It is stored in
// PRAGMA user_version; a file with a larger value is refused.
const SchemaVersion = 9

// ApplicationID marks a file as a rulebook database ("RULB"). It is stored in
// PRAGMA application_id.
const ApplicationID = 0x52554C42

// migrations[v] takes a database from user_version v-1 to v. Index 0 is
// unused. Each step runs in its own transaction, together with the update of
// user_version and meta.schema_version, so a file is always at exactly one
// version. Steps run with foreign-key enforcement off, as SQLite's
// procedure for rebuilding a table requires, and the foreign keys are
// checked before each step commits. To change the schema, append a step
// and bump SchemaVersion; never edit a step that has been released.
var migrations = []string{
	1: schemaV1,
	2: schemaV2,
	3: schemaV3,
	4: schemaV4,
	5: schemaV5,
	6: schemaV6,
	7: schemaV7,
	8: schemaV8,
	9: schemaV9,
}

// schemaV9 lets a rule carry conditions on its inputs' shapes
// (rules.Condition, "(kernel ?b 1 1)"): the rule holds only where they do.
// rules.hash, the proofs' claims and the versions' content hashes cover
// the conditions, but only where there are any, so the hashes of rules
// without conditions, and of every version released before, are unchanged.
// rule_text shows the conditions after " if ", as rule text writes them.
const schemaV9 = `
ALTER TABLE rules ADD COLUMN cond TEXT NOT NULL DEFAULT '';
DROP VIEW rule_text;
CREATE VIEW rule_text AS
	SELECT id, hash, status, src || ' => ' || dst || CASE WHEN cond = '' THEN '' ELSE ' if ' || cond END AS rule,
		max(src_ops, dst_ops) AS size
	FROM rules;
`

// schemaV8 makes the store's bookkeeping checkable.
//
// Runs record the host and process id that ran them, so that a run left
// 'running' by a process that is gone (killed, or its machine lost power)
// can be marked 'abandoned'. A CHECK constraint cannot be altered, so runs
// is rebuilt, the way SQLite's documentation describes (foreign keys off,
// new table, copy, drop, rename).
//
// Each proof records its claim: a hash of what it vouches for (the rule's
// text with its shapes, the axiom set, solver, budget and verdict, see
// Claim). A release counts a rule as proved only through a proof whose
// claim matches the rule's current text, so a rule, a shape or a verdict
// edited behind rulebook's back is not released. Proofs written before v8
// have no claim (”) and are verified again.
//
// Each axiom set caches the verdict of the check verify makes before using
// it (Z3's consistency check and the concrete check at small extents): a
// false or contradictory set proves every rule, so verify refuses one, and
// the check runs once per set.
const schemaV8 = `
CREATE TABLE runs_v8 (
	id           INTEGER PRIMARY KEY,
	command      TEXT    NOT NULL,
	config       TEXT    NOT NULL,
	seed         INTEGER NOT NULL,
	tool_version TEXT    NOT NULL,
	started_at   TEXT    NOT NULL,
	finished_at  TEXT,
	status       TEXT    NOT NULL CHECK (status IN ('running', 'done', 'interrupted', 'failed', 'abandoned')),
	graphs       INTEGER NOT NULL DEFAULT 0,
	classes      INTEGER NOT NULL DEFAULT 0,
	collisions   INTEGER NOT NULL DEFAULT 0,
	candidates   INTEGER NOT NULL DEFAULT 0,
	stored       INTEGER NOT NULL DEFAULT 0,
	host         TEXT    NOT NULL DEFAULT '',
	pid          INTEGER NOT NULL DEFAULT 0 CHECK (pid >= 0)
) STRICT;
INSERT INTO runs_v8(id, command, config, seed, tool_version, started_at, finished_at, status, graphs, classes, collisions, candidates, stored)
	SELECT id, command, config, seed, tool_version, started_at, finished_at, status, graphs, classes, collisions, candidates, stored FROM runs;
DROP VIEW run_summary;
DROP TABLE runs;
ALTER TABLE runs_v8 RENAME TO runs;
CREATE INDEX runs_status ON runs(status);
CREATE VIEW run_summary AS
	SELECT id, command, status, started_at, finished_at, graphs, candidates, stored
	FROM runs;

ALTER TABLE proofs ADD COLUMN claim TEXT NOT NULL DEFAULT '' CHECK (claim = '' OR length(claim) = 64);
ALTER TABLE axiom_sets ADD COLUMN checked TEXT NOT NULL DEFAULT '' CHECK (checked IN ('', 'sound', 'inconsistent', 'false'));
ALTER TABLE axiom_sets ADD COLUMN check_detail TEXT NOT NULL DEFAULT '';
`

// schemaV7 records the deterministic proof budget: the Z3 resource units a
// proof was allowed (0 for proofs decided by a wall-clock timeout, before
// v7) and spent, and, with each version, the provers and budgets its rules
// were proved under, so that the version can be rebuilt.
const schemaV7 = `
ALTER TABLE proofs ADD COLUMN budget INTEGER NOT NULL DEFAULT 0 CHECK (budget >= 0);
ALTER TABLE proofs ADD COLUMN units INTEGER NOT NULL DEFAULT 0 CHECK (units >= 0);
ALTER TABLE versions ADD COLUMN provers TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(provers));
DROP VIEW axiom_usage;
DROP VIEW latest_proofs;
CREATE VIEW latest_proofs AS
	SELECT p.* FROM proofs p
	WHERE p.id = (SELECT max(id) FROM proofs q WHERE q.rule_id = p.rule_id);
CREATE VIEW axiom_usage AS
	SELECT j.value AS axiom, count(*) AS proofs
	FROM latest_proofs p, json_each(p.core) j
	WHERE p.status = 'proved'
	GROUP BY j.value;
`

// schemaV6 records optimizations: one row per 'rulebook optimize' result and
// how often it applied each rule. Rules are keyed by canonical text, not
// rules.id, because the rule set may have come from an exported bundle that
// this database never held.
const schemaV6 = `
CREATE TABLE optimizations (
	id             INTEGER PRIMARY KEY,
	run_id         INTEGER NOT NULL REFERENCES runs(id),
	model          TEXT    NOT NULL,
	version_tag    TEXT    NOT NULL,
	version_hash   TEXT    NOT NULL,
	cost_model     TEXT    NOT NULL CHECK (cost_model IN ('analytic', 'measured')),
	cost_before_ms REAL    NOT NULL,
	cost_after_ms  REAL    NOT NULL,
	explored       INTEGER NOT NULL,
	seen           INTEGER NOT NULL,
	seconds        REAL    NOT NULL,
	stopped        TEXT    NOT NULL,
	optimized_at   TEXT    NOT NULL
) STRICT;
CREATE INDEX optimizations_version_hash ON optimizations(version_hash);

CREATE TABLE rule_uses (
	optimization_id INTEGER NOT NULL REFERENCES optimizations(id) ON DELETE CASCADE,
	rule            TEXT    NOT NULL,
	count           INTEGER NOT NULL CHECK (count > 0),
	PRIMARY KEY (optimization_id, rule)
) STRICT, WITHOUT ROWID;
`

// schemaV5 adds measured operator costs: one row per device and operator
// configuration, the latest measurement winning.
const schemaV5 = `
CREATE TABLE op_costs (
	device      TEXT    NOT NULL,
	operator    TEXT    NOT NULL,
	shapes      TEXT    NOT NULL,
	params      TEXT    NOT NULL,
	median_ms   REAL    NOT NULL CHECK (median_ms >= 0),
	repeats     INTEGER NOT NULL CHECK (repeats > 0),
	run_id      INTEGER NOT NULL REFERENCES runs(id),
	measured_at TEXT    NOT NULL,
	PRIMARY KEY (device, operator, shapes, params)
) STRICT, WITHOUT ROWID;
`

// schemaV4 adds pruning (a rule pruned in favour of a more general one keeps
// a pointer to it and the reason) and the origins of imported rules: the
// file and the rule's name there, also for rules that were already stored.
const schemaV4 = `
ALTER TABLE rules ADD COLUMN pruned_by INTEGER REFERENCES rules(id);
ALTER TABLE rules ADD COLUMN prune_reason TEXT
	CHECK (prune_reason IN ('renaming', 'common-subgraph-input', 'common-subgraph-output'));
CREATE INDEX rules_pruned_by ON rules(pruned_by);

CREATE TABLE rule_origins (
	rule_id INTEGER NOT NULL REFERENCES rules(id) ON DELETE CASCADE,
	run_id  INTEGER NOT NULL REFERENCES runs(id),
	name    TEXT    NOT NULL,
	PRIMARY KEY (rule_id, run_id, name)
) STRICT, WITHOUT ROWID;
`

// schemaV3 adds released versions: immutable, content-hashed rule sets.
const schemaV3 = `
CREATE TABLE versions (
	id         INTEGER PRIMARY KEY,
	tag        TEXT NOT NULL UNIQUE CHECK (tag GLOB '[A-Za-z0-9]*' AND tag NOT GLOB '*[^A-Za-z0-9._-]*'),
	hash       TEXT NOT NULL CHECK (length(hash) = 64),
	rules      INTEGER NOT NULL,
	axiom_sets TEXT NOT NULL CHECK (json_valid(axiom_sets)),
	operators  TEXT NOT NULL CHECK (json_valid(operators)),
	generator  TEXT NOT NULL CHECK (json_valid(generator)),
	parent_id  INTEGER REFERENCES versions(id),
	created_at TEXT NOT NULL
) STRICT;

CREATE TABLE version_rules (
	version_id INTEGER NOT NULL REFERENCES versions(id),
	rule_id    INTEGER NOT NULL REFERENCES rules(id),
	PRIMARY KEY (version_id, rule_id)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER versions_immutable BEFORE UPDATE ON versions
	BEGIN SELECT RAISE(ABORT, 'released versions are immutable'); END;
CREATE TRIGGER versions_undeletable BEFORE DELETE ON versions
	BEGIN SELECT RAISE(ABORT, 'released versions are immutable'); END;
CREATE TRIGGER version_rules_immutable BEFORE UPDATE ON version_rules
	BEGIN SELECT RAISE(ABORT, 'released versions are immutable'); END;
CREATE TRIGGER version_rules_undeletable BEFORE DELETE ON version_rules
	BEGIN SELECT RAISE(ABORT, 'released versions are immutable'); END;

CREATE VIEW version_summary AS
	SELECT v.id, v.tag, substr(v.hash, 1, 12) AS hash, v.rules, p.tag AS parent, v.created_at
	FROM versions v LEFT JOIN versions p ON p.id = v.parent_id;
`

// schemaV2 adds verification: the axiom sets rules were checked against and
// one row per verification of a rule.
const schemaV2 = `
CREATE TABLE axiom_sets (
	hash       TEXT PRIMARY KEY CHECK (length(hash) = 16),
	dir        TEXT NOT NULL,
	axioms     INTEGER NOT NULL,
	text       TEXT NOT NULL,
	created_at TEXT NOT NULL
) STRICT;

CREATE TABLE proofs (
	id         INTEGER PRIMARY KEY,
	rule_id    INTEGER NOT NULL REFERENCES rules(id) ON DELETE CASCADE,
	run_id     INTEGER NOT NULL REFERENCES runs(id),
	axiom_set  TEXT NOT NULL REFERENCES axiom_sets(hash),
	status     TEXT NOT NULL CHECK (status IN ('proved', 'unknown', 'refuted')),
	reason     TEXT NOT NULL,
	core       TEXT NOT NULL CHECK (json_valid(core)),
	elapsed_ms REAL NOT NULL,
	solver     TEXT NOT NULL,
	created_at TEXT NOT NULL
) STRICT;
CREATE INDEX proofs_rule ON proofs(rule_id);
CREATE INDEX proofs_axiom_set ON proofs(axiom_set);

CREATE VIEW latest_proofs AS
	SELECT p.* FROM proofs p
	WHERE p.id = (SELECT max(id) FROM proofs q WHERE q.rule_id = p.rule_id);

CREATE VIEW axiom_usage AS
	SELECT j.value AS axiom, count(*) AS proofs
	FROM latest_proofs p, json_each(p.core) j
	WHERE p.status = 'proved'
	GROUP BY j.value;
`

const schemaV1 = `
CREATE TABLE runs (
	id           INTEGER PRIMARY KEY,
	command      TEXT    NOT NULL,
	config       TEXT    NOT NULL,
	seed         INTEGER NOT NULL,
	tool_version TEXT    NOT NULL,
	started_at   TEXT    NOT NULL,
	finished_at  TEXT,
	status       TEXT    NOT NULL CHECK (status IN ('running', 'done', 'interrupted', 'failed')),
	graphs       INTEGER NOT NULL DEFAULT 0,
	classes      INTEGER NOT NULL DEFAULT 0,
	collisions   INTEGER NOT NULL DEFAULT 0,
	candidates   INTEGER NOT NULL DEFAULT 0,
	stored       INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TABLE rules (
	id          INTEGER PRIMARY KEY,
	hash        TEXT    NOT NULL UNIQUE CHECK (length(hash) = 16 AND hash NOT GLOB '*[^0-9a-f]*'),
	src         TEXT    NOT NULL,
	dst         TEXT    NOT NULL,
	inputs      TEXT    NOT NULL,
	constants   TEXT    NOT NULL,
	src_ops     INTEGER NOT NULL CHECK (src_ops >= 0),
	dst_ops     INTEGER NOT NULL CHECK (dst_ops >= 0),
	num_inputs  INTEGER NOT NULL CHECK (num_inputs >= 0),
	num_outputs INTEGER NOT NULL CHECK (num_outputs >= 0),
	fingerprint INTEGER NOT NULL,
	status      TEXT    NOT NULL CHECK (status IN ('candidate', 'proved', 'refuted', 'unknown')),
	run_id      INTEGER NOT NULL REFERENCES runs(id),
	created_at  TEXT    NOT NULL
) STRICT;

CREATE INDEX rules_status ON rules(status);
CREATE INDEX rules_run_id ON rules(run_id);

CREATE TABLE rule_operators (
	rule_id  INTEGER NOT NULL REFERENCES rules(id) ON DELETE CASCADE,
	operator TEXT    NOT NULL,
	PRIMARY KEY (rule_id, operator)
) STRICT, WITHOUT ROWID;

CREATE INDEX rule_operators_operator ON rule_operators(operator);

CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) STRICT;

CREATE VIEW rule_text AS
	SELECT id, hash, status, src || ' => ' || dst AS rule, max(src_ops, dst_ops) AS size
	FROM rules;

CREATE VIEW status_counts AS
	SELECT status, count(*) AS n FROM rules GROUP BY status;

CREATE VIEW operator_counts AS
	SELECT operator, count(*) AS n FROM rule_operators GROUP BY operator;

CREATE VIEW run_summary AS
	SELECT id, command, status, started_at, finished_at, graphs, candidates, stored
	FROM runs;
`
