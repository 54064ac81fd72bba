package audit

import (
	"fmt"
	"math"
)

// One-run bounds from the order statistics of the canary scores, with adaptive abstention.
//
// The auditor sorts the m canaries by score and, for every k of a grid fixed in advance,
// guesses "included" on the k+ highest and "excluded" on the k- lowest: nested guess sets
// read off the order statistics at both ends, from the few most confident canaries to all of
// them. How many to guess is then chosen from the data (the auditor abstains on the canaries
// it is least sure of, and lets the data say where the sure ones end); the choice is paid for
// by a weighted union bound over the grid, and each guess set is tested by Mahloujifar et al.'s
// f-DP recursion (OneRunGDPRejects), so the best of them is certified.
//
// What the order statistics may be used for is limited by what a mu-GDP guarantee per canary
// says about one run. Only the ranks and the inclusion bits enter: the guarantee constrains
// each canary's bit given the others, not the joint law of the scores, so neither the scores'
// magnitudes nor their independence may be assumed. The shared-level Gaussian mechanism
// (docs/statistics.md) draws one t = |mu/2 + Z| per run and scores every canary mu/2 + t or
// mu/2 - t, right with probability e^{mu t}/(1+e^{mu t}) independently given t: each canary's
// score is exactly N(mu b_i, 1) and the mechanism is exactly mu-GDP with respect to every bit,
// yet in a run with a large t all canaries are easy at once. A certificate that treats one
// run's canary scores as independent samples of the two worlds (the pair method DKW on the
// included against the excluded canaries) exceeded the true mu = 2 on it in 90 of 200 runs of
// 1000 canaries; the count tests here stay within their level (TestOneRunAdaptiveCoverage).

// OneRunAdaptiveMethod labels the rows of the adaptive one-run bound (OneRunAdaptiveMu) in the
// self-test. It is not a threshold method: Analyze and ParseThresholdMethod do not take it.
const OneRunAdaptiveMethod ThresholdMethod = "one-run-adaptive"

// oneRunAdaptiveFractions and oneRunAdaptiveWeights are the default grid of OneRunAdaptiveGrid:
// the share of the m canaries guessed (half at each end) and its share of the error level.
var (
	oneRunAdaptiveFractions = []float64{0.02, 0.05, 0.1, 0.2, 0.3, 0.45, 0.7, 1}
	oneRunAdaptiveWeights   = []float64{0.02, 0.03, 0.05, 0.75, 0.05, 0.04, 0.03, 0.03}
)

// OneRunAdaptiveGrid is the default grid of OneRunAdaptiveMu for m canaries, fixed before any
// score is seen: guess sets of 2%, 5%, 10%, 20%, 30%, 45%, 70% and 100% of the canaries, split
// evenly between the top and the bottom of the order, with 75% of the error level on 20% (the
// best single share at mu = 2 for m = 1000) and the rest spread so that the few most confident
// canaries and guessing on all of them can each still win. Shares that round to the same guess
// count merge their weights.
func OneRunAdaptiveGrid(m int) []OneRunChoice {
	var grid []OneRunChoice
	for i, f := range oneRunAdaptiveFractions {
		k := max(1, int(math.Round(f*float64(m)/2)))
		if 2*k > m {
			k = m / 2
		}
		if k < 1 {
			continue
		}
		if n := len(grid); n > 0 && grid[n-1].KPlus == k {
			grid[n-1].Weight += oneRunAdaptiveWeights[i]
			continue
		}
		grid = append(grid, OneRunChoice{KPlus: k, KMinus: k, Weight: oneRunAdaptiveWeights[i]})
	}
	return grid
}

// OneRunAdaptiveCandidate is one guess set of the grid: its choice, the level its test ran at
// (1 - (1 - confidence) times its share), its guesses, the right ones and the mu it certifies.
type OneRunAdaptiveCandidate struct {
	OneRunChoice
	Confidence float64 `json:"confidence"`
	Guesses    int     `json:"guesses"`
	Correct    int     `json:"correct"`
	Mu         float64 `json:"mu"`
}

// OneRunAdaptiveResult is the adaptive one-run bound: MuLower, the best of the candidates,
// holds at Confidence; Choice is the guess set the data chose.
type OneRunAdaptiveResult struct {
	Canaries   int                       `json:"canaries"`
	Confidence float64                   `json:"confidence"`
	MuLower    float64                   `json:"mu_lower"`
	Choice     OneRunChoice              `json:"choice"`
	Candidates []OneRunAdaptiveCandidate `json:"candidates"`
}

// OneRunAdaptiveMu certifies a lower bound on mu (Gaussian DP per canary) from one run: the
// scores (higher means "more likely included") and inclusion bits of m canaries, each included
// independently with probability 1/2, and a grid of nested guess sets fixed in advance (nil
// means OneRunAdaptiveGrid). For every choice it guesses on the KPlus top-scored and KMinus
// bottom-scored canaries (OneRunGuesses), tests mu-GDP at its share of the error level by the
// f-DP recursion (OneRunMu) and keeps the largest certified mu, so the number of guesses is
// chosen from the data. With probability at least confidence no candidate's bound exceeds the
// true mu (weighted Bonferroni: the shares are fixed before the scores are seen), so the
// chosen one does not either.
func OneRunAdaptiveMu(scores []float64, included []bool, grid []OneRunChoice, confidence float64) (*OneRunAdaptiveResult, error) {
	if !(confidence > 0 && confidence < 1) {
		return nil, fmt.Errorf("audit: adaptive one-run bound: confidence %v outside (0, 1)", confidence)
	}
	m := len(scores)
	if grid == nil {
		grid = OneRunAdaptiveGrid(m)
	}
	if len(grid) == 0 {
		return nil, fmt.Errorf("audit: adaptive one-run bound: empty grid of guess counts")
	}
	shares, err := gridLevels(grid)
	if err != nil {
		return nil, err
	}
	res := &OneRunAdaptiveResult{Canaries: m, Confidence: confidence}
	for i, c := range grid {
		if shares[i] == 0 {
			continue
		}
		each := 1 - (1-confidence)*shares[i]
		r, v, err := OneRunGuesses(scores, included, c.KPlus, c.KMinus)
		if err != nil {
			return nil, err
		}
		mu, err := OneRunMu(m, r, v, each)
		if err != nil {
			return nil, err
		}
		res.Candidates = append(res.Candidates, OneRunAdaptiveCandidate{OneRunChoice: c, Confidence: each, Guesses: r, Correct: v, Mu: mu})
		if mu > res.MuLower {
			res.MuLower, res.Choice = mu, c
		}
	}
	return res, nil
}
