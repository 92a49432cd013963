package compare

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"rulebook/exchange"
	"rulebook/internal/english"
	"rulebook/internal/progress"
	"rulebook/internal/safetext"
	"rulebook/rules"
	"rulebook/store"
	"rulebook/verify"
)

// Report relates the rules of a file to a released version and says
// whether our verifier proves them.
type Report struct {
	Version store.Version
	// Ours are the version's rules; Verdicts' steps index them.
	Ours     []store.Rule
	Verdicts []Verdict       // one per rule of the file, in file order
	Proofs   []verify.Result // parallel to Verdicts
	// Skipped summarises what the file's format could not carry over.
	Skipped []string
	// FlexFlow judges a FlexFlow file's rules again under FlexFlow's own
	// reading of its operators (FlexFlowReading); nil for other formats.
	FlexFlow           []ReadingResult
	Searched, Verified time.Duration
}

// File reads a rule file in format ("" guesses it, see exchange.ReadFile),
// relates each of its rules to version ref of db (see Compare), and runs
// the verifier that cfg configures on each. report hears both stages,
// "compare" and "verify".
func File(ctx context.Context, db *store.Store, path, format, ref string, lim Limits, cfg verify.Config, report progress.Func) (*Report, error) {
	f, format, err := exchange.ReadFileContext(ctx, path, format, cfg.Registry)
	if err != nil {
		return nil, err
	}
	theirs := make([]Foreign, len(f.Rules))
	for i, n := range f.Rules {
		theirs[i] = Foreign{Name: n.Name, Rule: n.Rule}
	}
	r := &Report{Skipped: exchange.SummarizeSkips(f.Skipped, f.Unknown), Proofs: make([]verify.Result, len(theirs))}
	if r.Version, r.Ours, err = db.VersionRules(ctx, ref); err != nil {
		return nil, err
	}
	ours := make([]*rules.Rule, len(r.Ours))
	for i, s := range r.Ours {
		t, err := s.Checked(cfg.Registry)
		if err != nil {
			return nil, fmt.Errorf("version %s: rule %d: %w", r.Version.Tag, s.ID, err)
		}
		ours[i] = t.Rule()
	}
	start := time.Now()
	if r.Verdicts, err = Compare(ctx, ours, theirs, lim, report); err != nil {
		return nil, err
	}
	r.Searched = time.Since(start)
	jobs := make([]verify.Job, len(theirs))
	for i, f := range theirs {
		jobs[i] = verify.Job{ID: int64(i), Rule: f.Rule}
	}
	cfg.Progress = report
	err = verify.Run(ctx, cfg, jobs, func(j verify.Job, res verify.Result) error { r.Proofs[j.ID] = res; return nil })
	r.Verified = time.Since(start) - r.Searched
	if err != nil {
		return nil, err
	}
	refuted := make([]bool, len(r.Proofs))
	for i, p := range r.Proofs {
		refuted[i] = p.Status == verify.Refuted
	}
	overrule(r.Verdicts, r.Proofs)
	Explain(r.Verdicts, refuted, ours)
	if format == "flexflow-json" {
		if r.FlexFlow, err = FlexFlowReading(ctx, path, r.Verdicts); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// overrule makes a rule our verifier refutes refuted, whatever the rewrite
// search said: a rule is contained in or implied by ours only if it is
// true. A false rule can match one of ours only if ours is false too, and
// be implied only through a rewrite against a rule's direction, where that
// rule's source may not be laid out validly.
func overrule(vs []Verdict, proofs []verify.Result) {
	for i, p := range proofs {
		if p.Status != verify.Refuted || (vs[i].Relation != Contained && vs[i].Relation != Implied) {
			continue
		}
		vs[i].Relation, vs[i].Steps, vs[i].Counterexample = Falsified, nil, "our verifier: "+p.Reason
	}
}

// WriteText prints the rules of the file that fall short (missed, or not
// proved), or all of them, as a table, then a summary of the relations
// and proofs and the time each stage took; path names the file.
func (r *Report) WriteText(w io.Writer, path string, all bool) {
	v, vs, proofs := r.Version, r.Verdicts, r.Proofs
	relations := map[Relation]int{}
	statuses := map[rules.Status]int{}
	var rows []shortRow
	for i, vd := range vs {
		relations[vd.Relation]++
		statuses[proofs[i].Status]++
		short := vd.Relation == Missed || vd.Relation == Falsified || vd.Relation == DegreeTwoOnly || proofs[i].Status != verify.Proved
		if !all && !short {
			continue
		}
		row := shortRow{name: safetext.Name(vd.Name), ours: describeRelation(vd, r.Ours), proof: string(proofs[i].Status), text: vd.Text.String()}
		switch reason := proofs[i].Reason; {
		case reason == "":
		case runeLen(reason) <= shortReason:
			row.proof += " (" + reason + ")"
		default:
			row.notes = append(row.notes, "proof: "+reason)
		}
		if vd.Relation == Missed {
			row.notes = append(row.notes, fmt.Sprintf("why: %s", vd.Why))
		}
		if vd.Counterexample != "" {
			row.notes = append(row.notes, "counterexample: "+vd.Counterexample)
		}
		rows = append(rows, row)
	}
	writeRows(w, rows)
	writeFreeInputs(w, vs)
	n := len(vs)
	pct := func(k int) string { return fmt.Sprintf("%d (%.1f%%)", k, 100*float64(k)/float64(max(n, 1))) }
	fmt.Fprintf(w, "%s: %s against %s (%s, %.12s)\n", path, english.Nouns(n, "rule"), v.Tag, english.Nouns(v.Rules, "rule"), v.Hash)
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "  not imported: %s\n", s)
	}
	fmt.Fprintf(w, "  contained %s, implied %s, missed %s", pct(relations[Contained]), pct(relations[Implied]), pct(relations[Missed]))
	if k := relations[Trivial]; k > 0 {
		fmt.Fprintf(w, ", trivial (both sides equal) %s", pct(k))
	}
	for _, rel := range []Relation{Falsified, DegreeTwoOnly} {
		if k := relations[rel]; k > 0 {
			fmt.Fprintf(w, ", %s %s", rel, pct(k))
		}
	}
	fmt.Fprintln(w)
	writeShortfalls(w, Count(vs))
	writeEveryDegree(w, vs)
	if r.FlexFlow != nil {
		WriteReadings(w, r.FlexFlow)
	}
	fmt.Fprintf(w, "  our verifier: proved %s, unknown %s, refuted %s\n", pct(statuses[verify.Proved]), pct(statuses[verify.Unknown]), pct(statuses[verify.Refuted]))
	fmt.Fprintf(w, "  rewrite search %s, verification %s\n", r.Searched.Round(time.Millisecond), r.Verified.Round(time.Millisecond))
}

// shortRow is one rule of compare's table: the short columns, the rule's
// text, and the notes that explain it.
type shortRow struct {
	name, ours, proof, text string
	notes                   []string
}

// Widths of compare's table: the name and relation columns are cut to
// these (a relation lists the rules that imply, which can be many), and
// notes wrap at noteWidth, so that no line runs to hundreds of columns.
const (
	nameWidth = 24
	oursWidth = 28
	noteWidth = 100
	// shortReason is the longest proof reason kept in its column, as
	// "unknown (timeout)"; longer ones go under the rule.
	shortReason = 16
)

// writeRows prints the table: one line per rule, its columns aligned and
// the rule's text last, then its notes below it, indented and wrapped.
func writeRows(w io.Writer, rows []shortRow) {
	if len(rows) == 0 {
		return
	}
	wn, wo, wp := len("RULE"), len("OURS"), len("PROOF")
	for i := range rows {
		rows[i].name, rows[i].ours = cut(rows[i].name, nameWidth), cut(rows[i].ours, oursWidth)
		wn, wo, wp = max(wn, runeLen(rows[i].name)), max(wo, runeLen(rows[i].ours)), max(wp, runeLen(rows[i].proof))
	}
	line := func(a, b, c, d string) {
		fmt.Fprintf(w, "%s  %s  %s  %s\n", pad(a, wn), pad(b, wo), pad(c, wp), d)
	}
	line("RULE", "OURS", "PROOF", "TEXT")
	for _, r := range rows {
		line(r.name, r.ours, r.proof, r.text)
		for _, n := range r.notes {
			for _, l := range wrap(n, noteWidth-6) {
				fmt.Fprintf(w, "      %s\n", l)
			}
		}
	}
}

func runeLen(s string) int { return utf8.RuneCountInString(s) }

// cut shortens s to n characters, the last an ellipsis.
func cut(s string, n int) string {
	if runeLen(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

func pad(s string, n int) string { return s + strings.Repeat(" ", max(0, n-runeLen(s))) }

// wrap breaks s at spaces into lines of at most width characters where
// it can; a word longer than width (a rule's text) stays whole.
func wrap(s string, width int) []string {
	var lines []string
	cur := ""
	for _, word := range strings.Fields(s) {
		switch {
		case cur == "":
			cur = word
		case runeLen(cur)+1+runeLen(word) <= width:
			cur += " " + word
		default:
			lines = append(lines, cur)
			cur = "  " + word
		}
	}
	return append(lines, cur)
}

// writeShortfalls counts the missed rules by cause and says how many of
// the true rules the version reaches: of those our operand roles allow,
// and of all. Trivial rules are in neither count.
func writeShortfalls(w io.Writer, t Tally) {
	for _, c := range Causes() {
		if k := t.Causes[c]; k > 0 {
			fmt.Fprintf(w, "    missed, %s: %d\n", c, k)
		}
	}
	reached, gaps, outside := t.Reached(), t.Missed(Gap), t.Missed(OutsideRoles)
	pct := func(n int) float64 { return 100 * float64(reached) / float64(max(n, 1)) }
	fmt.Fprintf(w, "  contained or implied: %d of %d true rules within our operand roles (%.2f%%), of %d true rules in all (%.2f%%)\n",
		reached, reached+gaps, pct(reached+gaps), reached+gaps+outside, pct(reached+gaps+outside))
}

// writeFreeInputs lists the rules whose target reads inputs their source
// never binds, each with whether that is sound.
func writeFreeInputs(w io.Writer, vs []Verdict) {
	var free []Verdict
	sound := 0
	for _, v := range vs {
		if len(v.Free) > 0 {
			free = append(free, v)
			if v.FreeSound {
				sound++
			}
		}
	}
	if len(free) == 0 {
		return
	}
	fmt.Fprintf(w, "%s whose target reads inputs the source never binds (%d sound):\n", english.Nouns(len(free), "rule"), sound)
	for _, v := range free {
		fmt.Fprintf(w, "  %s: %s\n", safetext.Name(v.Name), v.FreeWhy)
	}
}

// writeEveryDegree says, for a file with parallel rules, how many of those
// true at every degree tested the version contains or implies
// (EveryDegree).
func writeEveryDegree(w io.Writer, vs []Verdict) {
	parallel := false
	for _, v := range vs {
		parallel = parallel || IsParallel(v.Rule)
	}
	if parallel {
		reached, holds, never := EveryDegree(vs)
		fmt.Fprintf(w, "  contained or implied: %d of %d rules true at degrees %v (%.2f%%); %d more never apply\n",
			reached, holds, JudgedDegrees, 100*float64(reached)/float64(max(holds, 1)), never)
	}
}

// EveryDegree counts the rules true at every degree tested (holds):
// neither refuted nor true at degree 2 only, nor missed as false or as
// outside our operand roles, trivial ones aside; how many of them the
// version contains or implies (reached); and how many rules never apply
// (never), which holds leaves out.
func EveryDegree(vs []Verdict) (reached, holds, never int) {
	for _, v := range vs {
		switch {
		case v.Relation == Falsified, v.Relation == DegreeTwoOnly, v.Relation == Trivial:
		case v.Relation == Missed && v.Why.Cause == NeverApplies:
			never++
		case v.Relation == Missed && v.Why.Cause.Standing() != Gap:
		default:
			holds++
			if v.Relation == Contained || v.Relation == Implied {
				reached++
			}
		}
	}
	return reached, holds, never
}

// describeRelation names the version's rules an implying sequence uses, by
// store id; "~" marks a rule used target to source.
func describeRelation(vd Verdict, ours []store.Rule) string {
	if vd.Relation != Implied {
		return string(vd.Relation)
	}
	ids := make([]string, len(vd.Steps))
	for i, s := range vd.Steps {
		ids[i] = fmt.Sprint(ours[s.Rule].ID)
		if s.Reversed {
			ids[i] = "~" + ids[i]
		}
	}
	return fmt.Sprintf("implied by %s", strings.Join(ids, ","))
}
