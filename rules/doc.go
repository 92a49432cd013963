// Package rules is what every other package agrees on. It says which
// operators exist (the Registry, one Op row each), what a graph of them is,
// what a rule is, and how a rule is written as text. It imports no other
// package of rulebook, and all of them build on it. docs/rules.md tells the
// long story, from a registry row to the grammar of rule text.
package rules
