package figures

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/theory"
)

// Series identifies the findings of one attack under one threat model across T.
type Series struct{ Attack, Threat string }

func (s Series) String() string { return s.Attack + " (" + s.Threat + ")" }

// Input is what the figures show: a report's findings indexed by series and round, the theory
// and the round statistics by round, all in a fixed order.
type Input struct {
	// Rounds are every T with a finding, a bound or round statistics, increasing.
	Rounds []int
	// Series are the attacks and threat models, sorted by attack then threat model;
	// Findings[s][T] is the finding of series s at T (nil where there is none).
	Series   []Series
	Findings map[Series]map[int]*findings.Finding
	// Theory and Stats are the theory's bounds and the training's measurements at each T.
	Theory map[int]*theory.Bound
	Stats  map[int]*findings.RoundSummary
	// ClaimMu is the deployment's claimed mu (0: none), ClaimLabel what names it.
	ClaimMu    float64
	ClaimLabel string
	// ClaimEps at ClaimDelta is the deployment's claimed epsilon where its claim is one (0:
	// none), drawn on the trade-off figures as the trade-off curve of (epsilon, delta)-DP.
	ClaimEps, ClaimDelta float64
	// ClaimThreats are the threat models of the rows judged against the claim, sorted. A claim
	// about the global models is not judged on the uploads rows, and one about each upload not
	// on the model rows (docs/statistics.md): where some threat model of Series is missing here,
	// the figures name the rows the claim applies to. Nil: not known, nothing is named.
	ClaimThreats []string
	// BoundsEstimated is true when rows were judged against the convergent bound after T = 1,
	// or the uploads bound beyond T = 1: estimates, not proven bounds, whatever L (a certified
	// lower bound above one says the paper's argument or an assumed L does not cover the
	// deployment, not that the deployment broke a promise), and the figures say so.
	BoundsEstimated bool
	// Level states the confidence the certified bounds hold at, for captions; LevelShort is
	// the same without each row's level, for legends.
	Level, LevelShort string
}

// model is an Input with the attacks numbered for their colours and markers.
type model struct {
	*Input
	// attackIndex numbers the attacks (attackOrder): an attack's colour and marker in every
	// figure.
	attackIndex map[string]int
}

func newModel(in *Input) *model {
	var attackNames []string
	for _, s := range in.Series {
		attackNames = append(attackNames, s.Attack)
	}
	return &model{Input: in, attackIndex: attackOrder(attackNames)}
}

// findingRounds returns the rounds that have at least one finding.
func (m *model) findingRounds() []int {
	var out []int
	for _, t := range m.Rounds {
		for _, s := range m.Series {
			if m.Findings[s][t] != nil {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// num formats a number of a label or caption as report's tables do: four significant
// digits, NaN as "-".
func num(x float64) string {
	switch {
	case math.IsNaN(x):
		return "-"
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "-inf"
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}

// claimScope names the rows the claim is judged on, as "all-iterates and final", when that is
// not every threat model of the figures' series; "" otherwise.
func (m *model) claimScope() string {
	if len(m.ClaimThreats) == 0 {
		return ""
	}
	for _, s := range m.Series {
		if !slices.Contains(m.ClaimThreats, s.Threat) {
			ts := m.ClaimThreats
			if len(ts) == 1 {
				return ts[0]
			}
			return strings.Join(ts[:len(ts)-1], ", ") + " and " + ts[len(ts)-1]
		}
	}
	return ""
}

// estimateNote is what a caption adds when the theory's bounds are estimates
// (Input.BoundsEstimated), or "".
func (m *model) estimateNote() string {
	if !m.BoundsEstimated {
		return ""
	}
	return " The convergent bound (and the uploads bound beyond T = 1) is an estimate, not a proven bound: the paper's argument does not cover every smooth loss, and L may be assumed. A certified lower bound above it says so, not that the deployment broke a promise."
}
