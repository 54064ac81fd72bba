package figures

import (
	"math"
	"strconv"

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
