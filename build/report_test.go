package build

import (
	"strings"
	"testing"

	"rulebook/store"
)

// The next steps a build prints name the database it built into (issue
// 25: after 'build --db pcg.db' they dropped --db and so looked in
// ./rulebook.db), quoted where a shell would split the path.
func TestNextStepsKeepTheDatabase(t *testing.T) {
	cases := []struct{ db, want string }{
		{"rulebook.db", ""},
		{"pcg.db", " --db pcg.db"},
		{"/tmp/my rules.db", ` --db "/tmp/my rules.db"`},
	}
	for _, c := range cases {
		var out strings.Builder
		s := &Summary{Version: store.Version{Tag: "v1", Rules: 3, Hash: "ab"}}
		s.WriteText(&out, c.db)
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if !strings.HasPrefix(line, "look:") && !strings.HasPrefix(line, "export:") {
				continue
			}
			for _, step := range strings.Split(line, ";") {
				if has := strings.Contains(step, " --db "); has != (c.want != "") || c.want != "" && !strings.HasSuffix(strings.TrimSpace(step), strings.TrimSpace(c.want)) {
					t.Errorf("db %s: step %q, want it to end with %q", c.db, step, c.want)
				}
			}
		}
	}
}
