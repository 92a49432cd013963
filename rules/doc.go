// Package rules is what every other package agrees on: which operators
// exist (the Registry, one Op row each), what a graph of them is, what a
// rule is and how it is written as text. It imports no other package of
// rulebook, and all of them build on it.
//
// A rule is written as s-expressions over the operators' Z3 symbols:
//
//	(ewadd (matmul ?a ?b) (matmul ?a ?c)) => (matmul ?a (ewadd ?b ?c))
//
// docs/rules.md tells the long story: what a registry row holds, graphs
// and rules, canonical text and Text, statuses, the input pool, and the
// grammar of rule text.
package rules
