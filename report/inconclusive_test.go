package report

import (
	"bytes"
	"testing"

	"github.com/fedaudit/fedaudit/findings"
)

// TestHeadlineWithoutVerdictSpeaksOfBounds: an inconclusive headline (most runs diverged) gives
// no verdict and a headline without a claim judges no promise, so neither page says that "the
// verdicts hold": they say why no verdict is given and what the certified bounds hold at.
func TestHeadlineWithoutVerdictSpeaksOfBounds(t *testing.T) {
	for _, tc := range []struct {
		status, text, want string
	}{
		{findings.StatusInconclusive, "INCONCLUSIVE: training diverged in 5 of 6 runs by T = 3.",
			"No verdict is given; the certified bounds hold jointly at 95% confidence over 6 rows"},
		{findings.StatusNoClaim, "NO CLAIM: nothing the deployment promises was judged.",
			"No claim of the deployment is judged; the certified bounds hold jointly at 95% confidence over 6 rows"},
	} {
		in := syntheticInput(t)
		in.Headline.Status = tc.status
		in.Headline.Text = tc.text
		_, files := writeReport(t, in, Options{})
		for _, name := range []string{"report.html", "report.md"} {
			page := files[name]
			if bytes.Contains(page, []byte("The verdicts hold")) || bytes.Contains(page, []byte("The verdict holds")) {
				t.Errorf("%s, %s: a headline without a verdict states that verdicts hold", tc.status, name)
			}
			if !bytes.Contains(page, []byte(tc.want)) {
				t.Errorf("%s, %s: no %q", tc.status, name, tc.want)
			}
		}
	}
}
