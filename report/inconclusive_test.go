package report

import (
	"bytes"
	"testing"

	"github.com/fedaudit/fedaudit/findings"
)

// TestInconclusiveHeadlineGivesNoVerdict: an inconclusive headline (most runs diverged) gives no
// verdict, so neither page says that "the verdicts hold": they say that no verdict is given and
// what the certified bounds hold at.
func TestInconclusiveHeadlineGivesNoVerdict(t *testing.T) {
	in := syntheticInput(t)
	in.Headline.Status = findings.StatusInconclusive
	in.Headline.Text = "INCONCLUSIVE: training diverged in 5 of 6 runs by T = 3."
	_, files := writeReport(t, in, Options{})
	for _, name := range []string{"report.html", "report.md"} {
		page := files[name]
		if bytes.Contains(page, []byte("The verdicts hold")) || bytes.Contains(page, []byte("The verdict holds")) {
			t.Errorf("%s: an inconclusive headline states that verdicts hold", name)
		}
		if !bytes.Contains(page, []byte("No verdict is given; the certified bounds hold jointly at 95% confidence over 6 rows.")) {
			t.Errorf("%s: no statement that no verdict is given", name)
		}
	}
}
