package store

import "testing"

func TestHeatMapCells(t *testing.T) {
	for n, want := range map[int]string{0: "", 1: "1░", 2: "2░", 3: "3▒", 4: "4▒", 6: "6▓", 7: "7█", 8: "8█"} {
		if got := cell(n, 8); got != want {
			t.Errorf("cell(%d) of max 8 = %q, want %q", n, got, want)
		}
	}
	if got := truncate("abcdef", 4); got != "abc…" {
		t.Errorf("truncate = %q", got)
	}
	if got := truncate("abc", 4); got != "abc" {
		t.Errorf("truncate = %q", got)
	}
}
