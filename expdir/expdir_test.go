package expdir

import (
	"path/filepath"
	"testing"
)

// The layout is a contract with users, scripts and older directories: every name is pinned.
func TestLayout(t *testing.T) {
	d := Dir(filepath.Join("x", "exp"))
	for _, tc := range []struct{ got, want string }{
		{d.Config(), "x/exp/config.json"},
		{d.Runs(), "x/exp/runs"},
		{d.Scores(), "x/exp/scores.arrow"},
		{d.Findings(), "x/exp/findings.json"},
		{d.Rounds(), "x/exp/rounds.json"},
		{d.Reconstructions(), "x/exp/reconstructions.json"},
		{d.ReportHTML(), "x/exp/report.html"},
		{d.ReportMarkdown(), "x/exp/report.md"},
		{d.Figure("mu_vs_T", "svg"), "x/exp/figures/mu_vs_T.svg"},
		{d.Table("attacks", "tex"), "x/exp/tables/attacks.tex"},
		{d.Lock(), "x/exp/.lock"},
		{d.ShardLock(3, 12), "x/exp/.lock-shard-00003-of-00012"},
	} {
		if tc.got != filepath.FromSlash(tc.want) {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
	if w := d.Written(); len(w) != 4 || w[0] != d.Path() || w[1] != d.Runs() {
		t.Errorf("written folders %v", w)
	}
}
