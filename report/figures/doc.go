// Package figures draws the figures of an audit report with gonum/plot, as SVG (and PNG on
// request): mu against the number of rounds T (certified lower bounds per attack and threat
// model beside the theory's bounds, the realized mu and the claim), the trade-off curves at
// each T (each attack's empirical envelope and certified error pair beside the Gaussian
// trade-off curves, in three views: the whole square, the corner near the axes on log scales
// and the ROC on log-log axes), and the measured sensitivity against T.
//
// An attack keeps its colour and marker in every figure (the Okabe-Ito palette first, in the
// order of the attacks package's registry) and a threat model its dash. The SVG bytes depend on
// the data alone (no fonts embedded), so the same Input draws the same files. Package report
// arranges its findings into an Input, places the figures in its pages and writes the files.
package figures
