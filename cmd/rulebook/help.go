package main

import (
	"embed"
	"strings"
)

// The commands' long descriptions are documents, kept in help/NAME.txt
// beside the code, so that the Go files hold flags and printing.
//
//go:embed help/*.txt
var helpFiles embed.FS

// help returns the long description of the command the file names.
func help(name string) string {
	b, err := helpFiles.ReadFile("help/" + name + ".txt")
	if err != nil {
		panic(err) // the files are embedded at build time: a missing one is a programming error
	}
	return strings.TrimSuffix(string(b), "\n")
}
