package report

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/internal/numfmt"
	"github.com/fedaudit/fedaudit/report/figures"
	"github.com/fedaudit/fedaudit/theory"
)

// table is a rectangular table of preformatted cells, rendered to CSV, LaTeX, Markdown and
// HTML from the same cells so that every format shows the same numbers.
type table struct {
	name    string // file stem in tables/
	title   string
	caption string
	// header names the columns in the CSV file, for programs; labels, where not nil, names
	// them for readers, in the HTML page, Markdown and LaTeX (with units).
	header []string
	labels []string
	rows   [][]string
}

// shown is the header a reader sees: labels where set, else header.
func (t *table) shown() []string {
	if t.labels != nil {
		return t.labels
	}
	return t.header
}

// num formats a statistic with four significant digits; NaN is "-" (unknown), never "NaN".
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

// lower formats a certified lower bound (or a ratio of one to an exact number) as num does, but
// rounded down at its fourth digit, so the table never states more than was certified
// (internal/numfmt).
func lower(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return num(x)
	}
	return numfmt.LowerG(x, 4)
}

// rate formats a probability-like number (AUC, TPR, accuracy) with three decimals.
func rate(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return num(x)
	}
	return offTheEnds(x, 'f', 3)
}

// offTheEnds formats a rate in [0, 1] in strconv's format verb with prec digits, and with more
// where rounding would print 1 (or 0) for a rate that is not: an AUC of 0.99998 read "1.000" (or
// "1" in a sweep table), which is perfect separation, and it was not.
func offTheEnds(x float64, verb byte, prec int) string {
	s := strconv.FormatFloat(x, verb, prec, 64)
	for p := prec + 1; p <= 17; p++ {
		v, _ := strconv.ParseFloat(s, 64)
		if !(v == 1 && x < 1) && !(v == 0 && x > 0) {
			break
		}
		s = strconv.FormatFloat(x, verb, p, 64)
	}
	return s
}

// fixed2 formats a measurement on its own scale (decibels, distances) with two decimals, so
// that a column of them lines up where four significant digits would drop a trailing zero.
func fixed2(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return num(x)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

func (t *table) csv() ([]byte, error) {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.Write(t.header); err != nil {
		return nil, fmt.Errorf("table %s: %w", t.name, err)
	}
	if err := w.WriteAll(t.rows); err != nil {
		return nil, fmt.Errorf("table %s: %w", t.name, err)
	}
	return b.Bytes(), nil
}

// LatexLabel is the label of a table of an experiment's report: tab:EXPERIMENT:TABLE, the
// experiment's name kept to letters, digits, '-' and '.' (others become '-'), or tab:TABLE for
// a table of no one experiment.
func LatexLabel(experiment, table string) string {
	name := strings.Map(func(r rune) rune {
		if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '.') {
			return r
		}
		return '-'
	}, experiment)
	if name == "" {
		return "tab:" + table
	}
	return "tab:" + name + ":" + table
}

var latexEscaper = strings.NewReplacer(
	`\`, `\textbackslash{}`, `&`, `\&`, `%`, `\%`, `$`, `\$`, `#`, `\#`, `_`, `\_`,
	`{`, `\{`, `}`, `\}`, `~`, `\textasciitilde{}`, `^`, `\textasciicircum{}`,
)

// latex renders a booktabs tabular inside a table float; the caption names the threat model
// and confidence level like the HTML page does. The label is tab:EXPERIMENT:NAME where the
// experiment is named (LatexLabel), so that two experiments' tables in one paper do not define
// one label twice.
func (t *table) latex(experiment string) []byte {
	var b bytes.Buffer
	b.WriteString("% " + t.title + " (needs \\usepackage{booktabs})\n")
	b.WriteString("\\begin{table}[t]\n\\centering\n")
	fmt.Fprintf(&b, "\\caption{%s}\n", latexEscaper.Replace(t.caption))
	fmt.Fprintf(&b, "\\label{%s}\n", LatexLabel(experiment, t.name))
	spec := make([]byte, len(t.header))
	for i := range spec {
		spec[i] = 'l'
		if i > 0 && t.numeric(i) {
			spec[i] = 'r'
		}
	}
	fmt.Fprintf(&b, "\\begin{tabular}{%s}\n\\toprule\n", spec)
	b.WriteString(latexRow(t.shown()))
	b.WriteString("\\midrule\n")
	for _, r := range t.rows {
		b.WriteString(latexRow(r))
	}
	b.WriteString("\\bottomrule\n\\end{tabular}\n\\end{table}\n")
	return b.Bytes()
}

func latexRow(cells []string) string {
	esc := make([]string, len(cells))
	for i, c := range cells {
		esc[i] = latexEscaper.Replace(c)
	}
	return strings.Join(esc, " & ") + " \\\\\n"
}

// numeric reports whether column i holds only numbers or "-", to right-align it.
func (t *table) numeric(i int) bool {
	if len(t.rows) == 0 {
		return false
	}
	for _, r := range t.rows {
		if r[i] == "-" {
			continue
		}
		if _, err := strconv.ParseFloat(r[i], 64); err != nil {
			return false
		}
	}
	return true
}

var markdownEscaper = strings.NewReplacer(`|`, `\|`, "\n", " ")

func (t *table) markdown() string {
	var b strings.Builder
	row := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + markdownEscaper.Replace(c) + " |")
		}
		b.WriteString("\n")
	}
	row(t.shown())
	b.WriteString("|")
	for i := range t.header {
		if t.numeric(i) {
			b.WriteString("---:|")
		} else {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		row(r)
	}
	return b.String()
}

// series identifies the findings of one attack under one threat model across T.
type series struct{ attack, threat string }

func (s series) String() string { return s.attack + " (" + s.threat + ")" }

// model is the Input arranged for rendering: findings indexed by series and round, the
// theory by round, all in a fixed order.
type model struct {
	in       *Input
	rounds   []int // every T with a finding, a bound or round statistics, increasing
	series   []series
	findings map[series]map[int]*findings.Finding
	theory   map[int]*theory.Bound
	stats    map[int]*findings.RoundSummary
	threats  []string // threat models in use, sorted
}

func newModel(in *Input) *model {
	m := &model{
		in:       in,
		findings: make(map[series]map[int]*findings.Finding),
		theory:   make(map[int]*theory.Bound),
		stats:    make(map[int]*findings.RoundSummary),
	}
	roundSet := map[int]bool{}
	threatSet := map[string]bool{}
	for i := range in.Bounds {
		b := &in.Bounds[i]
		if _, ok := m.theory[b.T]; !ok {
			m.theory[b.T] = b
		}
		roundSet[b.T] = true
	}
	for i := range in.Findings {
		f := &in.Findings[i]
		s := series{f.Attack, f.Threat}
		if m.findings[s] == nil {
			m.findings[s] = make(map[int]*findings.Finding)
			m.series = append(m.series, s)
		}
		m.findings[s][f.Round] = f
		roundSet[f.Round] = true
		threatSet[f.Threat] = true
		if _, ok := m.theory[f.Round]; !ok && f.Theory != nil {
			m.theory[f.Round] = f.Theory
		}
	}
	for i := range in.Rounds {
		r := &in.Rounds[i]
		m.stats[r.Round] = r
		roundSet[r.Round] = true
	}
	for t := range roundSet {
		m.rounds = append(m.rounds, t)
	}
	slices.Sort(m.rounds)
	slices.SortFunc(m.series, func(a, b series) int {
		if c := strings.Compare(a.attack, b.attack); c != 0 {
			return c
		}
		return strings.Compare(a.threat, b.threat)
	})
	for t := range threatSet {
		m.threats = append(m.threats, t)
	}
	slices.Sort(m.threats)
	return m
}

// figureInput is the model as package figures draws it.
func (m *model) figureInput() *figures.Input {
	in := &figures.Input{Rounds: m.rounds, Findings: make(map[figures.Series]map[int]*findings.Finding, len(m.series)),
		Theory: m.theory, Stats: m.stats, ClaimMu: m.in.ClaimMu, ClaimLabel: m.in.ClaimLabel,
		ClaimEps: m.in.ClaimEps, ClaimDelta: m.in.ClaimDelta,
		Level: m.levelText(), LevelShort: m.levelShort()}
	for _, s := range m.series {
		fs := figures.Series{Attack: s.attack, Threat: s.threat}
		in.Series = append(in.Series, fs)
		in.Findings[fs] = m.findings[s]
		if (m.in.ClaimMu > 0 || m.in.ClaimEps > 0) && !slices.Contains(in.ClaimThreats, s.threat) {
			for _, f := range m.findings[s] {
				if judgedOnClaim(f, m.in.ClaimMu, m.in.ClaimEps) {
					in.ClaimThreats = append(in.ClaimThreats, s.threat)
					break
				}
			}
		}
	}
	slices.Sort(in.ClaimThreats)
	for _, f := range m.in.Findings {
		// Rows judged against the convergent bound after T = 1 (and the uploads bound built
		// on it) are judged against an estimate (theoryClaim in experiment/analyze.go).
		in.BoundsEstimated = in.BoundsEstimated || f.ClaimKind == findings.ClaimEstimate
	}
	return in
}

// judgedOnClaim reports whether a row's verdict compared the deployment's claimed mu or
// epsilon (not a bound of the theory): a claim about the models is not judged on the uploads
// rows, one about each upload not on the model rows.
func judgedOnClaim(f *findings.Finding, mu, eps float64) bool {
	if f.Verdict == nil || (f.ClaimKind != "" && f.ClaimKind != findings.ClaimDeployment) {
		return false
	}
	return slices.ContainsFunc(f.Verdict.Checks, func(c audit.Check) bool {
		return (c.Quantity == "mu" && mu > 0 && c.Claimed == mu) || (c.Quantity == "epsilon" && eps > 0 && c.Claimed == eps)
	})
}

// findingRounds returns the rounds that have at least one finding.
func (m *model) findingRounds() []int {
	var out []int
	for _, t := range m.rounds {
		for _, s := range m.series {
			if m.findings[s][t] != nil {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

func (m *model) noise() string {
	if m.in.NoiseLabel == "" {
		return "-"
	}
	return m.in.NoiseLabel
}

// verdictStatus is a row's verdict as the report prints it. A certified bound above a theory
// value that is not a proven bound (the convergent bound after T = 1, whatever L) is "exceeds
// estimate", never "violated": it says the paper's argument, or an assumed L, does not cover
// the deployment, not that the deployment broke a promise; and the estimate is named. A row whose scores look reversed is marked.
func verdictStatus(f *findings.Finding) string {
	v := f.Verdict
	if v == nil {
		return "not judged"
	}
	status := string(v.Status)
	if f.ClaimKind == findings.ClaimEstimate {
		if v.Status == audit.Violated {
			status = "exceeds estimate"
		}
		if f.ClaimSource != "" {
			status += " (of the " + f.ClaimSource + ")"
		}
	}
	if v.Reason != "" {
		status += ": " + v.Reason
	}
	if f.Reversed() && !math.IsInf(f.ReversedMuLower, 0) {
		// As the terminal table marks it (verdictText): the verdict says nothing about the claim
		// (docs/statistics.md, "Scores in the wrong direction").
		status += " [reversed scores?]"
	}
	return status
}

// levelText states the confidence the certified bounds hold at: family-wise over the rows
// when the headline gives the family, else the rows' own level.
func (m *model) levelText() string {
	h := m.in.Headline
	if h == nil || h.Confidence == 0 || h.Rows == 0 {
		return m.confidenceText()
	}
	joint := percentText(h.Confidence)
	if h.Rows == 1 {
		return joint
	}
	joint += " jointly over " + strconv.Itoa(h.Rows) + " rows"
	if rc := m.in.Family.RowConfidence; rc > 0 {
		joint += " (each row at " + percentText(rc) + ")"
	}
	return joint
}

// levelShort is levelText without the row level, for legends.
func (m *model) levelShort() string {
	h := m.in.Headline
	if h == nil || h.Confidence == 0 || h.Rows <= 1 {
		return m.levelText()
	}
	return percentText(h.Confidence) + " jointly over " + strconv.Itoa(h.Rows) + " rows"
}

// percentText writes a confidence with 6 significant digits, rounded down (a guarantee is
// never stated above itself: numfmt.LowerConfidence).
func percentText(p float64) string {
	return numfmt.LowerConfidence(100*p, 'g', 6) + "%"
}

func (m *model) confidenceText() string {
	if m.in.Confidence == 0 {
		return "-"
	}
	return percentText(m.in.Confidence)
}

// wide builds a paper-shaped table: a row per attack and threat model at the noise level,
// a column per T.
func (m *model) wide(name, title, caption string, value func(*audit.Result) string) *table {
	rounds := m.findingRounds()
	t := &table{name: name, title: title, caption: caption,
		header: []string{"Attack", "Threat model", "Noise"}}
	for _, r := range rounds {
		t.header = append(t.header, "T="+strconv.Itoa(r))
	}
	for _, s := range m.series {
		row := []string{s.attack, s.threat, m.noise()}
		for _, r := range rounds {
			cell := "-"
			if f := m.findings[s][r]; f != nil {
				cell = value(f.Result)
			}
			row = append(row, cell)
		}
		t.rows = append(t.rows, row)
	}
	return t
}

func (m *model) tables() []*table {
	conf := m.levelText()
	auc := m.wide("auc", "Attack AUC",
		"AUC of each attack (world C positive) by number of rounds T; rows: attack, threat model and noise level.",
		func(r *audit.Result) string { return rate(r.AUC) })
	tpr := m.wide("tpr_at_1pct_fpr", "Attack TPR at 1% FPR",
		"True-positive rate at 1% false-positive rate of each attack by number of rounds T.",
		func(r *audit.Result) string { return rate(r.TPRAt1e2) })
	muw := m.wide("mu_lower", "Certified mu lower bounds",
		"Certified lower bound on mu (Gaussian DP) at confidence "+conf+" by number of rounds T.",
		func(r *audit.Result) string { return lower(r.MuLower) })

	attacks := &table{name: "attacks", title: "Attack success per attack and T",
		caption: "Per attack, threat model and T: TPR at 0.1% and 1% FPR (the empirical TPR at the largest FPR not above them: with fewer than 1000, or 100, runs of world C' that FPR is 0, so the column is the TPR at no false positive and reads low; compare such rows by AUC), AUC, best balanced accuracy, the Gaussian point estimate of mu (not a bound: the mu of the Gaussian pair of the same AUC; where it lies below mu lower the scores are not Gaussian-shaped, the certified bound holds and the estimate understates) and the certified lower bounds at confidence " + conf +
			". On all-iterates rows mu lower and eps lower are the largest certified at T or an earlier checkpoint (the observer of every iterate at T sees every earlier one, so a test at an earlier checkpoint is a test at T, within the family's correction); mu lower (T alone) is what the scores of T alone certify.",
		header: []string{"Attack", "Threat model", "T", "N(C)", "N(C')", "TPR@0.1%FPR", "TPR@1%FPR", "AUC",
			"Best balanced acc.", "mu estimate", "mu lower", "mu lower (T alone)", "mu exact", "eps lower", "delta"}}
	verdicts := &table{name: "verdicts", title: "Verdicts",
		caption: "Certified lower bounds against the claimed guarantee: the claim is violated when a certified lower bound exceeds it (confidence " + conf + "); tightness is lower bound / claim. On final-model rows, heuristic mu is the last-iterate heuristic (for DP-FedAvg, heuristic eps: its eps at the analysis's delta, the claim's when the claim is an eps) and lower / heuristic the certified mu over the last-iterate heuristic (Steinke et al., 2025: the final model's exact mu if the losses were linear; a heuristic, not a bound), or for DP-FedAvg the certified eps over the heuristic's eps at the same delta: how far the attack is from what a final-model attack can be expected to reach. A claimed mu is judged on mu lower, a claimed eps on eps lower at the claim's delta. A row judged against a theory value that is not a proven bound (the convergent bound after T = 1, whatever L: docs/theory.md) says \"exceeds estimate\" instead of \"violated\": the paper's argument (or an assumed L) does not cover the deployment, which is not a violation by the deployment.",
		header: []string{"Attack", "Threat model", "T", "mu lower", "eps lower", "Claimed mu", "Claimed eps", "Claim delta",
			"Claim source", "Tightness", "Heuristic mu", "Heuristic eps", "Lower / heuristic", "Status"}}
	for _, s := range m.series {
		for _, r := range m.rounds {
			f := m.findings[s][r]
			if f == nil {
				continue
			}
			res := f.Result
			exact := "-"
			if !math.IsNaN(f.ExactMu) && !math.IsInf(f.ExactMu, 0) {
				exact = num(f.ExactMu)
			}
			own := res.MuLower
			if f.AtT != nil {
				own = f.AtT.MuLower // carried from an earlier checkpoint (experiment's carryAllIterates)
			}
			attacks.rows = append(attacks.rows, []string{s.attack, s.threat, strconv.Itoa(r),
				strconv.Itoa(res.N0), strconv.Itoa(res.N1), rate(res.TPRAt1e3), rate(res.TPRAt1e2),
				rate(res.AUC), rate(res.BestBalancedAccuracy), num(res.MuEstimate), lower(res.MuLower), lower(own),
				exact, lower(res.EpsLower), num(res.Delta)})
			claimMu, claimEps, claimDelta, tight, status := "-", "-", "-", "-", "not judged"
			source := f.ClaimSource
			if source == "" {
				source = "-"
			}
			if v := f.Verdict; v != nil {
				for _, c := range v.Checks {
					switch c.Quantity {
					case "mu":
						claimMu = num(c.Claimed)
					case "epsilon":
						claimEps, claimDelta = num(c.Claimed), num(c.Delta)
					}
				}
				if len(v.Checks) > 0 {
					tight = lower(v.Tightness)
				}
				status = verdictStatus(f)
			}
			// The heuristic's mu, or for the DP-FedAvg family its eps, each in a column of its
			// own so that the CSV's columns hold numbers ("eps 2.018" was one cell).
			heuristicMu, heuristicEps := "-", "-"
			if h := f.MuHeuristic(); isFinite(h) {
				heuristicMu = num(h)
			} else if h := f.EpsHeuristic; h > 0 && isFinite(h) {
				heuristicEps = num(h)
			}
			verdicts.rows = append(verdicts.rows, []string{s.attack, s.threat, strconv.Itoa(r),
				lower(res.MuLower), lower(ComparedEpsLower(f)), claimMu, claimEps, claimDelta, source, tight, heuristicMu, heuristicEps, ofHeuristic(f), status})
		}
	}

	rounds := &table{name: "rounds", title: "Theory, sensitivity and utility per T",
		caption: "Per T: the convergent bound (final model), the composition bound (every iterate), the last-iterate heuristic (the final model's exact mu if the losses were linear: a heuristic, not a bound), the realized mu of the trained runs, the measured sensitivity ||w_T - w'_T|| (mean over coupled pairs), and utility.",
		header: []string{"T", "mu convergent", "mu closed form", "mu composition", "mu heuristic", "Realized mu",
			"Sensitivity", "Train loss", "Test accuracy", "Diverged runs"}}
	for _, r := range m.rounds {
		row := []string{strconv.Itoa(r), "-", "-", "-", "-", "-", "-", "-", "-", "-"}
		if b := m.theory[r]; b != nil {
			row[1], row[2], row[3], row[4] = num(b.Mu), num(b.MuClosedForm), num(b.MuComposition), num(b.MuHeuristic)
		}
		if st := m.stats[r]; st != nil {
			row[5], row[6], row[7] = num(st.RealizedMu), num(st.Sensitivity), num(st.TrainLoss)
			row[8], row[9] = rate(st.TestAccuracy), strconv.Itoa(st.Diverged)
		}
		rounds.rows = append(rounds.rows, row)
	}
	out := []*table{auc, tpr, muw, attacks, verdicts, rounds}
	if mt := m.metricsTable(); mt != nil {
		out = append(out, mt)
	}
	if ot := m.oneRunTable(); ot != nil {
		out = append(out, ot)
	}
	return out
}

// oneRunTable lists the one-run rows: the runs and canaries they pool, the certified bounds
// and, in columns marked as such, the estimates beside them; nil without one-run rows.
func (m *model) oneRunTable() *table {
	t := &table{name: "one_run", title: "One-run audit",
		caption: "Per canary attack, threat model and T, from the canaries of the world-C runs (each canary included with probability 1/2): " +
			"mu lower (f-DP, Mahloujifar, Melis and Chaudhuri 2025) and eps lower at delta (Steinke, Nasr and Jagielski 2023) are certified at confidence " + m.levelText() +
			"; the columns marked (estimate) are point estimates without a confidence statement (the Gaussian mu of the AUC; the one-shot estimate of Andrew et al. 2024) and never decide a verdict.",
		header: []string{"Attack", "Threat model", "T", "Runs", "Canaries", "Included", "AUC", "mu lower", "eps lower", "delta", "mu exact",
			"mu (estimate, AUC)", "mu (estimate, one-shot)", "eps (estimate, one-shot)"}}
	for _, s := range m.series {
		for _, r := range m.rounds {
			f := m.findings[s][r]
			if f == nil || !f.OneRun() {
				continue
			}
			res := f.Result
			exact, estMu, estEps := "-", "-", "-"
			if !math.IsNaN(f.ExactMu) && !math.IsInf(f.ExactMu, 0) {
				exact = num(f.ExactMu)
			}
			if e := f.Estimate; e != nil {
				estMu, estEps = num(e.Mu), num(e.Epsilon)
			}
			t.rows = append(t.rows, []string{s.attack, s.threat, strconv.Itoa(r), strconv.Itoa(f.Runs), strconv.Itoa(res.N0 + res.N1),
				strconv.Itoa(res.N0), rate(res.AUC), lower(res.MuLower), lower(res.EpsLower), num(res.Delta), exact,
				num(res.MuEstimate), estMu, estEps})
		}
	}
	if len(t.rows) == 0 {
		return nil
	}
	return t
}

// metricLabels name the attacks' own metrics for readers, with their units; the CSV keeps the
// keys, which findings.json and audit compare --metrics use too. The keys are the attacks
// package's (report does not import it: TestMetricLabels checks every metric it registers
// has a label here).
var metricLabels = map[string]string{
	"inversion_psnr":      "PSNR (dB)",
	"inversion_psnr_flat": "PSNR of a flat image (dB)",
	"inversion_ssim":      "SSIM",
	"inversion_l2":        "L2",
	"inversion_mse":       "MSE",
	"label_accuracy":      "Label accuracy",
	"label_count_error":   "Label count error",
	"llg_accuracy":        "LLG label accuracy",
	"llg_count_error":     "LLG label count error",
}

// metricLabel is a metric's name for readers: its label, or its key when it has none.
func metricLabel(key string) string {
	if l, ok := metricLabels[key]; ok {
		return l
	}
	return key
}

// metricsTable lists the attacks' own success metrics (label accuracy, PSNR, ...), Sun et al.'s
// label-reconstruction and gradient-inversion tables; nil when no attack reports any. The CSV
// names a column by the metric's key (inversion_psnr), the other formats by its label.
func (m *model) metricsTable() *table {
	var names []string
	for _, s := range m.series {
		for _, r := range m.rounds {
			if f := m.findings[s][r]; f != nil {
				for name := range f.Metrics {
					if !slices.Contains(names, name) {
						names = append(names, name)
					}
				}
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	t := &table{name: "attack_metrics", title: "Attack success metrics",
		caption: "Means over runs of each attack's own success metrics (e.g. label accuracy of label reconstruction; MSE, PSNR in dB, SSIM, L2 distance to the sample of gradient inversion), by attack, threat model and T; noise " + m.noise() + ".",
		header:  append([]string{"Attack", "Threat model", "T"}, names...),
		labels:  []string{"Attack", "Threat model", "T"}}
	for _, name := range names {
		t.labels = append(t.labels, metricLabel(name))
	}
	for _, s := range m.series {
		for _, r := range m.rounds {
			f := m.findings[s][r]
			if f == nil || len(f.Metrics) == 0 {
				continue
			}
			row := []string{s.attack, s.threat, strconv.Itoa(r)}
			for _, name := range names {
				cell := "-"
				if v, ok := f.Metrics[name]; ok {
					cell = num(v)
				}
				row = append(row, cell)
			}
			t.rows = append(t.rows, row)
		}
	}
	return t
}

// ofHeuristic is a final-model row's certified bound over the last-iterate heuristic: mu over
// the heuristic's mu, or, on DP-FedAvg rows, whose heuristic is an epsilon, the compared eps
// lower over the heuristic's eps at the same delta; "-" on the other rows and where the
// heuristic is unknown.
func ofHeuristic(f *findings.Finding) string {
	if h := f.MuHeuristic(); h > 0 && !math.IsInf(h, 0) {
		return lower(f.Result.MuLower / h)
	}
	if h := f.EpsHeuristic; h > 0 && !math.IsInf(h, 0) {
		return lower(ComparedEpsLower(f) / h)
	}
	return "-"
}
