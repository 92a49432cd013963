package english

import "testing"

func TestNouns(t *testing.T) {
	for _, tc := range []struct {
		n      int
		noun   string
		plural []string
		want   string
	}{
		{1, "rule", nil, "1 rule"},
		{0, "rule", nil, "0 rules"},
		{2, "rule", nil, "2 rules"},
		{1, "is", []string{"are"}, "1 is"},
		{3, "is", []string{"are"}, "3 are"},
	} {
		if got := Nouns(tc.n, tc.noun, tc.plural...); got != tc.want {
			t.Errorf("Nouns(%d, %q, %q) = %q, want %q", tc.n, tc.noun, tc.plural, got, tc.want)
		}
	}
}
