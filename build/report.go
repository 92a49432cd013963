package build

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"rulebook/prune"
	"rulebook/verify"
)

// WriteText prints the closing summary of a build into db: one line per
// stage with what it did and how long it took, then the version.
func (s *Summary) WriteText(w io.Writer, db string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "stage\tresult\ttime")
	var total time.Duration
	for _, st := range s.Stages {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", st.Name, s.describe(st.Name), st.Elapsed.Round(time.Millisecond))
		total += st.Elapsed
	}
	fmt.Fprintf(tw, "total\t\t%s\n", total.Round(time.Millisecond))
	tw.Flush()
	v := s.Version
	fmt.Fprintf(w, "released %s: %d rules, hash %s, in %s\n", v.Tag, v.Rules, v.Hash, db)
	fmt.Fprintf(w, "proved under %s with axiom set %s\n", strings.Join(v.Provers, "; "), strings.Join(v.AxiomSets, ", "))
	at := dbFlag(db)
	fmt.Fprintf(w, "look:   rulebook list --status proved%s; rulebook show ID --svg rule.svg%s\n", at, at)
	fmt.Fprintf(w, "export: rulebook export --version %s --format json -o %s.json%s\n", v.Tag, v.Tag, at)
}

// dbFlag is the --db a next step needs to find the database at db: none
// for the default ./rulebook.db, the path quoted where a shell would split
// it.
func dbFlag(db string) string {
	if db == DefaultDB {
		return ""
	}
	if strings.ContainsAny(db, " \t\n'\"$`\\;&|<>()*?[]#~") {
		db = strconv.Quote(db)
	}
	return " --db " + db
}

// DefaultDB is the database commands use without --db or RULEBOOK_DB.
const DefaultDB = "rulebook.db"

// describe says what a stage did.
func (s *Summary) describe(stage string) string {
	switch stage {
	case "generate":
		g := s.Generated
		return fmt.Sprintf("%d graphs, %d candidate rules (%d new)", g.Stats.Graphs, len(g.Candidates), g.New)
	case "verify":
		v := s.Verified
		return fmt.Sprintf("%d rules: %d proved, %d unknown, %d refuted", v.Rules,
			v.Counts[verify.Proved], v.Counts[verify.Unknown], v.Counts[verify.Refuted])
	case "prune":
		by := map[prune.Reason]int{}
		for _, d := range s.Pruned.Decisions {
			by[d.Reason]++
		}
		return fmt.Sprintf("%d pruned (renaming %d, common subgraph %d)", len(s.Pruned.Decisions), by[prune.Renaming], by[prune.CommonInput]+by[prune.CommonOutput])
	case "release":
		same := ""
		if s.Version.SameAs != "" {
			same = ", the same rules as " + s.Version.SameAs
		}
		return fmt.Sprintf("%s: %d rules proved again, parent %s%s", s.Version.Tag, s.Version.Rules, orNone(s.Version.Parent), same)
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
