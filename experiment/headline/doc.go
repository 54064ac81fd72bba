// Package headline sums the rows of an analysis up in its headline: the verdict over every
// row (Summarize: violated, consistent or no claim, named by the strongest row, with notes on
// rows judged against an estimate, reversed attacks and unpaired scores) and the training's
// divergence (Diverged: inconclusive where most runs of an audited checkpoint diverged, a note
// where some did).
//
// It sits below package experiment, whose analysis calls it; it imports no experiment package.
package headline
