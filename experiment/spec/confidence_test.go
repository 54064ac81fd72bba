package spec

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/audit"
)

// TestCheckConfidence: a confidence so close to 1 that the analysis's corrections round a
// row's confidence to 1 passed validation and failed the analysis after training ("confidence
// 1 outside (0, 1)", status 1); it is refused with the config (status 2) now, and every
// confidence accepted keeps its rows' confidence below 1 for as many rows and looks as
// MinConfidenceGap promises.
func TestCheckConfidence(t *testing.T) {
	for _, c := range []struct {
		confidence float64
		want       string // "" when accepted
	}{
		{0.95, ""},
		{0.999999999, ""},
		{1 - MinConfidenceGap, ""},
		{1 - 1e-10, "need 1 - confidence >= 1e-09"},
		{0.9999999999999999, "need 1 - confidence >= 1e-09"},
		{1, "need a value in (0, 1), got 1"},
		{0, "need a value in (0, 1), got 0"},
		{math.NaN(), "need a value in (0, 1), got NaN"},
	} {
		err := CheckConfidence(c.confidence)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: refused: %v", c.confidence, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: %v, want %q", c.confidence, err, c.want)
		}
	}
	// The closest accepted confidence, divided among 10^7 rows and looks, stays below 1.
	if got := audit.FamilyRowConfidence(1-MinConfidenceGap, 1e7); !(got < 1) {
		t.Errorf("row confidence %v at 10^7 rows, want < 1", got)
	}

	// The config refuses it as a config error naming the field.
	_, err := Parse([]byte(tinyHead +
		"train: {algorithm: fedavg, model: {kind: softmax}, rounds: 1, local_steps: 1, learning_rate: 0.1, checkpoints: [1]}\n" +
		"audit: {confidence: 0.9999999999999999}\n"))
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "audit.confidence: need 1 - confidence >= 1e-09") {
		t.Errorf("Parse: %v, want a config error on audit.confidence", err)
	}
}
