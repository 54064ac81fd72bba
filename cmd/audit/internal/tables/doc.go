// Package tables writes the text of the audit command's outputs other than an analysis (whose
// table, comparisons and reports package report writes): the theory's bounds (text and JSON),
// an experiment's plan with its cost tables, the simulated and measured cost of audits, and
// the estimators' self-test. Each writer takes the values its command computed and an
// io.Writer; the command's golden files in cmd/audit/testdata/cli pin every byte.
package tables
