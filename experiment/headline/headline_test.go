package headline

import (
	"math"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/findings"
)

// TestRoundUnknown: a score file without a round column (and an outputs table without one)
// gives its rows round 0, and the headline named them "score (T = 0)" and "loss (final,
// T = 0)", which reads as before training. They are "T unknown" now, in the sentence and in the
// notes; a row with a round keeps its T.
func TestRoundUnknown(t *testing.T) {
	row := func(attack, threat string, round int, mu float64) findings.Finding {
		return findings.Finding{Attack: attack, Threat: threat, Round: round, ExactMu: math.NaN(), ReversedMuLower: math.NaN(),
			Result: &audit.Result{MuLower: mu, AUC: 0.8}, Unpaired: []int64{7}}
	}
	fam := findings.Family{Confidence: 0.95, Rows: 1}
	for _, tc := range []struct {
		f          findings.Finding
		name, lost string
	}{
		{row("score", "", 0, 0.8), "score (T unknown)", "T = 0"},
		{row("loss", "final", 0, 0.5), "loss (final, T unknown)", "T = 0"},
		{row("loss", "final", 3, 0.5), "loss (final, T = 3)", "unknown"},
	} {
		h := Summarize([]findings.Finding{tc.f}, fam, nil)
		if !strings.Contains(h.Text, "strongest attack, "+tc.name+", certifies") || strings.Contains(h.Text, tc.lost) {
			t.Errorf("headline %q, want the row named %q", h.Text, tc.name)
		}
		if len(h.Notes) != 1 || !strings.HasPrefix(h.Notes[0], tc.name+": 1 coupled scores without a partner") {
			t.Errorf("notes %q, want the unpaired note on %q", h.Notes, tc.name)
		}
	}
}
