package audit

import "fmt"

// MuCeiling is the largest lower bound on mu that n0 scores of world C and n1 of world C' can
// certify with opts: that of scores that separate the two worlds completely (every score of C
// above every score of C'), where the best test counts no error in either world. A row at its
// ceiling measures the number of runs more than the mechanism: the attack told every run apart,
// and more runs would certify more. Options are those Analyze takes (Result's Method,
// Confidence, Delta and Paired reproduce a row's).
func MuCeiling(n0, n1 int, opts Options) (float64, error) {
	res, err := Ceiling(n0, n1, opts)
	if err != nil {
		return 0, err
	}
	return res.MuLower, nil
}

// Ceiling is the result of scores that separate the worlds completely (MuCeiling): its MuLower,
// and its EpsLowerAt(delta) for any delta, are the most n0 and n1 runs can certify with opts.
func Ceiling(n0, n1 int, opts Options) (*Result, error) {
	if n0 < 1 || n1 < 1 {
		return nil, fmt.Errorf("audit: ceiling of %d and %d scores: need at least one of each world", n0, n1)
	}
	c, cPrime := make([]float64, n0), make([]float64, n1)
	for i := range c {
		c[i] = 1
	}
	res, err := Analyze(c, cPrime, opts)
	if err != nil {
		return nil, fmt.Errorf("audit: ceiling of %d and %d scores: %w", n0, n1, err)
	}
	return res, nil
}
