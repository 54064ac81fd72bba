// Package report renders the results of an audit (package findings) as a self-contained report:
// an HTML page with inline SVG figures and tables, a Markdown version of the same tables, the
// figures as SVG files (PNG on request) and the tables as CSV and LaTeX, at the paths package
// expdir names. It also writes the text the CLI prints: the analysis table (WriteAnalysis,
// WriteTable) and side-by-side comparisons of experiments (WriteComparison).
//
// The report shows, for every number of rounds T, the empirical trade-off curves of the attacks
// beside the certified points and the theoretical Gaussian-DP curves, mu against T, attack-success
// tables shaped like those of Sun et al. (2026, docs/theory.md), the verdicts on the claimed
// guarantees, and the sensitivity and utility measured in training. Package report/figures draws
// the figures and package report/gallery the reconstructions; this package arranges the input
// for them, lays out the pages and tables and writes the files. Every number names the threat
// model it belongs to. The output is a function of the Input alone (no timestamps, no random
// ids), so two runs over the same results give byte-identical files.
package report
