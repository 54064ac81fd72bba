package report

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/internal/fsutil"
	"github.com/fedaudit/fedaudit/report/figures"
	"github.com/fedaudit/fedaudit/report/gallery"
)

// threatDescriptions says what an adversary sees under each known threat model.
var threatDescriptions = map[string]string{
	"final":        "the final global model w_T only (the observer of the convergent bound and of the last-iterate heuristic)",
	"all-iterates": "every global model w_1, ..., w_T (only the composition bound applies)",
	"uploads":      "the target client's noisy upload of round T, beside the global model before it (judged against the uploads bound: one upload carries noise σ, the global model σ/√n)",
}

// section groups figures and tables under one heading, in the order the report shows them.
// The HTML page shows the figures and tables in folded (tables that repeat what the verdict
// table shows, trade-off figures at all but the last checkpoint) under one closed <details>
// element after the rest, with foldSummary as its summary; report.md shows everything in
// place.
type section struct {
	ID, Title, Intro string
	figs             []*figures.Figure
	images           []*pngFigure
	tables           []*table
	folded           map[any]bool
	foldSummary      string
}

// fold marks figures and tables of the section to be shown folded in the HTML page.
func (s *section) fold(summary string, items ...any) {
	if s.folded == nil {
		s.folded = map[any]bool{}
	}
	for _, it := range items {
		s.folded[it] = true
	}
	s.foldSummary = summary
}

// maxOpenVerdictRows is the most rows of the verdicts table the HTML page shows open.
const maxOpenVerdictRows = 60

// statusCounts counts the verdicts table's rows by the first word of their status, for the
// summary of the folded table: "violated 3, consistent 397".
func statusCounts(t *table) string {
	col := slices.Index(t.header, "Status")
	counts := map[string]int{}
	var order []string
	for _, r := range t.rows {
		s := r[col]
		for _, w := range []string{"violated", "exceeds estimate", "consistent", "not judged", "invalid"} {
			if strings.HasPrefix(s, w) {
				s = w
				break
			}
		}
		if counts[s] == 0 {
			order = append(order, s)
		}
		counts[s]++
	}
	slices.Sort(order)
	parts := make([]string, len(order))
	for i, s := range order {
		parts[i] = fmt.Sprintf("%s %d", s, counts[s])
	}
	return strings.Join(parts, ", ")
}

// pngFigure is a picture that is a PNG from the start (the gallery): written to figures/ and
// shown inline in the HTML page as a data URL.
type pngFigure struct {
	name, title, caption string
	png                  []byte
}

// rendered is a report ready to be written: its sections and each figure's SVG.
type rendered struct {
	in       *Input
	m        *model
	sections []section
	svgs     map[*figures.Figure][]byte
	tables   []*table
	figs     []*figures.Figure
	images   []*pngFigure
}

func build(in *Input) (*rendered, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	m := newModel(in)
	figs, err := figures.Build(m.figureInput())
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	tables := m.tables()
	byName := map[string]*table{}
	for _, t := range tables {
		byName[t.name] = t
	}
	r := &rendered{in: in, m: m, svgs: make(map[*figures.Figure][]byte, len(figs)), tables: tables, figs: figs}
	gal, pairs, err := gallery.PNG(in.Gallery)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	if gal != nil {
		r.images = append(r.images, &pngFigure{name: "gallery", title: "Reconstructions of the sample that differs",
			caption: "Per checkpoint T (rows) and world: the sample itself (ε in C, ε' in C', with its label), then each reconstructing attack's estimate of it from that world's run of " + pairs +
				" only (the first pair by id that the attack scored; not chosen by quality), with that reconstruction's PSNR in dB and SSIM against the sample. The attack success metrics table gives the means over all the pairs the attack reconstructed, which may differ from this pair's. Pixels enlarged without smoothing, values clipped to [0, 1].",
			png: gal})
	}
	for _, f := range figs {
		b, err := f.SVG()
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		r.svgs[f] = b
	}
	var muFigs, tradeoffFigs, sensFigs []*figures.Figure
	for _, f := range figs {
		switch {
		case f.Name == "mu_vs_T" || f.Name == "eps_vs_T":
			muFigs = append(muFigs, f)
		case strings.HasPrefix(f.Name, "tradeoff_"):
			tradeoffFigs = append(tradeoffFigs, f)
		default:
			sensFigs = append(sensFigs, f)
		}
	}
	muTitle := "μ against T"
	if slices.ContainsFunc(muFigs, func(f *figures.Figure) bool { return f.Name == "eps_vs_T" }) {
		muTitle = "μ and ε against T"
	}
	mu := section{ID: "mu", Title: muTitle,
		Intro: "Certified lower bounds (what the attacks prove) against the theoretical upper bounds (what the analysis promises). Compare each attack only with the bound of its threat model.",
		figs:  muFigs, tables: []*table{byName["mu_lower"]}}
	mu.fold("Table: certified μ lower bounds by T (the verdict table's mu lower, one column per T)", byName["mu_lower"])
	tradeoff := section{ID: "tradeoff", Title: "Trade-off curves",
		Intro: "One panel per number of rounds T. Lower curves mean stronger attacks; the mechanism's true trade-off curve lies on or below every certified square and, if the bound holds, on or above its T_G curve.",
		figs:  tradeoffFigs}
	if n := len(tradeoffFigs); n > 1 {
		// The last checkpoint shown, the others one click away: each figure is as tall as a
		// screen.
		var ts []string
		var items []any
		for _, f := range tradeoffFigs[:n-1] {
			ts = append(ts, strings.TrimPrefix(f.Name, "tradeoff_T"))
			items = append(items, f)
		}
		tradeoff.fold("Trade-off curves at T = "+strings.Join(ts, ", "), items...)
	}
	attacks := section{ID: "attacks", Title: "Attack success",
		Intro:  "Rows: attack, threat model and noise level; columns: number of rounds T. World C (the target's record present) is the positive class.",
		tables: attackTables(byName)}
	attacks.fold("Table: attack success per attack, threat model and T (TPR at 0.1% and 1% FPR, AUC, balanced accuracy, the μ estimate and the certified bounds of the verdict table)", byName["attacks"])
	checks := r.checkSection()
	r.tables = append(r.tables, checks.tables...)
	verdicts := section{ID: "verdicts", Title: "Verdicts",
		Intro:  "Each claimed guarantee against the certified lower bound of each attack. \"violated\" means a certified lower bound exceeds the claim at the stated confidence; \"consistent\" does not prove the claim.",
		tables: []*table{byName["verdicts"]}}
	if vt := byName["verdicts"]; len(vt.rows) > maxOpenVerdictRows {
		// Hundreds of rows (many checkpoints) stood before every figure; the headline names
		// the rows that decide the verdict, and the table stays a click away.
		verdicts.fold(fmt.Sprintf("Table: the verdicts of all %d rows (%s)", len(vt.rows), statusCounts(vt)), vt)
	}
	r.sections = []section{
		verdicts,
		checks,
		mu, tradeoff, attacks,
		r.gallerySection(),
		{ID: "training", Title: "Theory, sensitivity and utility",
			Intro: "What training measured: the distance between the final models of coupled runs, the realized privacy loss, and the utility of the models.",
			figs:  sensFigs, tables: []*table{byName["rounds"]}},
	}
	r.sections = slices.DeleteFunc(r.sections, func(s section) bool { return s.ID == "" })
	if t := byName["one_run"]; t != nil {
		oneRun := section{ID: "one-run", Title: "One-run audit",
			Intro: "Every run carried canaries, each included with probability 1/2 and its inclusion recorded; the canary attacks score every canary, and an auditor who guesses inclusion from the scores alone certifies a lower bound from the number of correct guesses. " +
				"On these rows N(C) and N(C') count the included and the excluded canaries. Only the certified columns (mu lower, eps lower) decide verdicts; the estimates beside them carry no confidence statement.",
			tables: []*table{t}}
		r.sections = append(r.sections[:1], append([]section{oneRun}, r.sections[1:]...)...)
	}
	return r, nil
}

// gallerySection shows the gallery, or is empty (and dropped) when there is none.
func (r *rendered) gallerySection() section {
	if len(r.images) == 0 {
		return section{}
	}
	return section{ID: "gallery", Title: "Reconstructions",
		Intro:  "What the attacks that reconstruct inputs from the target client's upload recover of the sample that differs between the worlds: the first thing to look at, and the pictures behind the PSNR and SSIM columns of the attack-success tables.",
		images: r.images}
}

// attackTables are the attack-success tables, with the attacks' own metrics where any attack
// reports them.
func attackTables(byName map[string]*table) []*table {
	out := []*table{byName["auc"], byName["tpr_at_1pct_fpr"], byName["attacks"]}
	if t := byName["attack_metrics"]; t != nil {
		out = append(out, t)
	}
	return out
}

func prettyConfig(raw []byte) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "(not given)"
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

type fact struct{ Name, Value string }

func (r *rendered) facts() []fact {
	in := r.in
	orDash := textOrDash
	return []fact{
		{"Dataset hash", orDash(in.DatasetHash)},
		{"Tool version", orDash(in.ToolVersion)},
		{"Coupled pairs", strconv.Itoa(in.Pairs)},
		{"Runs trained", r.runsText()},
		{"Claim", r.claimText()},
		{"Confidence level", r.m.levelText()},
		{"Threshold method", orDash(in.Method)},
		{"delta (for eps)", num(in.Delta)},
		{"Smoothness", orDash(in.Smoothness)},
		{"Noise", r.m.noise()},
	}
}

// runsText is the number of runs trained; a one-run audit trains both worlds of each pair (the
// coupling isolates the target) but reads the world-C runs only, which its table counts.
func (r *rendered) runsText() string {
	s := strconv.Itoa(r.in.Runs)
	if r.in.Method == string(audit.OneRunMethod) {
		s += fmt.Sprintf(" (the one-run audit reads the %d of world C)", r.in.Pairs)
	}
	return s
}

func (r *rendered) claimText() string {
	if r.in.ClaimMu > 0 {
		s := "μ = " + num(r.in.ClaimMu)
		if r.in.ClaimLabel != "" {
			s += " (" + r.in.ClaimLabel + ")"
		}
		return s
	}
	if r.in.ClaimEps > 0 {
		s := "ε = " + num(r.in.ClaimEps) + " at δ = " + num(r.in.ClaimDelta)
		if r.in.ClaimLabel != "" {
			s += " (" + r.in.ClaimLabel + ")"
		}
		return s
	}
	return "no single claim: each row is judged against the claim or bound in its verdict"
}

// headlineView is the headline as the page shows it: a badge, the sentence without the
// badge's word repeated, the family-wise statement and the notes.
type headlineView struct {
	Class, Badge, Text, Family string
	// Warning is the note of failed grey-box checks, shown above the other notes: the verdict
	// is about a mechanism that did not run.
	Warning string
	Notes   []string
}

func (r *rendered) headline() *headlineView {
	h := r.in.Headline
	if h == nil {
		return nil
	}
	v := &headlineView{Badge: strings.ToUpper(h.Status), Text: h.Text, Notes: h.Notes}
	// An analysis made after the checks carries their note already, one made before does not;
	// either way it is shown once, as the headline's warning.
	if note := r.in.Check.HeadlineNote(); note != "" {
		v.Warning = note
		v.Notes = slices.DeleteFunc(slices.Clone(v.Notes), func(n string) bool { return n == note })
	}
	v.Text = strings.TrimPrefix(v.Text, v.Badge+": ")
	switch h.Status {
	case findings.StatusViolated:
		v.Class = "violated"
	case findings.StatusConsistent:
		v.Class = "consistent"
		if v.Warning != "" {
			// Not green: nothing is consistent about a mechanism other than the declared one.
			v.Class = "consistent checkfailed"
		}
	default: // no claim, inconclusive: grey
		v.Class = "noclaim"
	}
	v.Family = familyText(h, r.in.Family.RowConfidence)
	return v
}

// familyText says what the confidence of the verdicts is: family-wise over the rows, which is
// what the analysis certifies (each row at the Bonferroni level 1 - (1 - confidence)/rows). An
// inconclusive headline gives no verdict and a headline without a claim judges no promise of
// the deployment: the text then speaks of the bounds, not of verdicts.
func familyText(h *findings.Headline, rowConfidence float64) string {
	if h.Confidence == 0 {
		return ""
	}
	var lead string
	switch h.Status {
	case findings.StatusInconclusive:
		lead = "No verdict is given; the certified "
	case findings.StatusNoClaim:
		lead = "No claim of the deployment is judged; the certified "
	}
	if lead != "" && h.Rows <= 1 {
		return lead + "bound holds at " + percentText(h.Confidence) + " confidence."
	}
	if h.Rows <= 1 {
		return "The verdict holds at " + percentText(h.Confidence) + " confidence."
	}
	s := "The verdicts hold jointly at "
	if lead != "" {
		s = lead + "bounds hold jointly at "
	}
	s += percentText(h.Confidence) + " confidence over " + strconv.Itoa(h.Rows) + " rows"
	if rowConfidence > 0 {
		s += " (Bonferroni: each row's bound is certified at " + percentText(rowConfidence) + ")"
	}
	return s + ": the chance that any certified bound of the report is wrong is at most " + percentText(1-h.Confidence) + "."
}

type threatLine struct{ Name, Description string }

func (r *rendered) threats() []threatLine {
	var out []threatLine
	for _, t := range r.m.threats {
		d, ok := threatDescriptions[t]
		if !ok {
			d = "(unknown threat model)"
		}
		out = append(out, threatLine{t, d})
	}
	return out
}

// inlineSVG drops the XML prolog and generator comment, which have no place inside HTML.
func inlineSVG(b []byte) template.HTML {
	s := string(b)
	if i := strings.Index(s, "<svg"); i >= 0 {
		s = s[i:]
	}
	s = strings.Replace(s, "<svg ", `<svg role="img" class="plot" `, 1)
	return template.HTML(s) // generated by vgsvg from our own data, text escaped by vgsvg
}

const pageCSS = `
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.8em; margin-bottom: 0.2em; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 2em; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1.5em; }
dl.facts dt { font-weight: 600; }
dl.facts dd { margin: 0; font-family: ui-monospace, monospace; overflow-wrap: anywhere; min-width: 0; }
pre { background: #f6f6f6; border: 1px solid #ddd; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
.figs { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(480px, 100%), 1fr)); gap: 1.5em; }
figure { margin: 0; max-width: 760px; }
figure.wide { grid-column: 1 / -1; max-width: 1100px; }
.headline { border: 2px solid #888; border-radius: 6px; padding: 0.8em 1.2em; margin: 1em 0 1.5em; background: #f5f5f5; }
.headline.violated { border-color: #b00020; background: #fdecee; }
.headline.consistent { border-color: #1b7a3a; background: #ebf6ee; }
.headline .statement { font-size: 1.15em; margin: 0 0 0.5em; }
.badge { display: inline-block; padding: 0.1em 0.6em; margin-right: 0.5em; border-radius: 4px; font-weight: 700; letter-spacing: 0.05em; color: #fff; background: #666; }
.violated .badge { background: #b00020; }
.consistent .badge { background: #1b7a3a; }
.headline.checkfailed { border-color: #a35200; background: #fff3e0; }
.checkfailed .badge { background: #a35200; }
.headline .warning { color: #8a2b00; margin: 0.3em 0; }
.headline .family { margin: 0.3em 0; }
.headline ul.notes { margin: 0.4em 0 0; padding-left: 1.2em; font-size: 0.92em; }
details { margin-top: 2em; }
summary { cursor: pointer; font-weight: 600; }
figure svg.plot { width: 100%; height: auto; background: #fff; }
figure img.gallery { max-width: 100%; height: auto; image-rendering: pixelated; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #444; }
table { border-collapse: collapse; margin: 1em 0 2em; font-size: 0.85em; }
caption { caption-side: top; text-align: left; font-size: 0.95em; color: #444; padding-bottom: 0.4em; }
caption strong { color: #222; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25em 0.55em; text-align: left; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.short { white-space: nowrap; }
details.more { margin: 0.5em 0 1.5em; }
dl.terms dt { font-weight: 600; margin-top: 0.5em; }
dl.terms dd { margin: 0.1em 0 0 1.2em; }
.scroll { overflow-x: auto; }
footer { margin-top: 3em; font-size: 0.85em; color: #666; }
@media (max-width: 600px) {
  body { margin: 1em auto; padding: 0 0.6em; }
  dl.facts { grid-template-columns: 1fr; gap: 0 0; }
  dl.facts dd { margin-bottom: 0.4em; }
  .figs { display: block; }
  figure { margin-bottom: 1.5em; }
}
`

var pageTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<meta name="viewport" content="width=device-width, initial-scale=1"/>
<title>{{.Title}}</title>
<style>{{.CSS}}</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{- with .Headline}}
<section id="headline" class="headline {{.Class}}">
<p class="statement"><span class="badge">{{.Badge}}</span> {{.Text}}</p>
{{- if .Warning}}
<p class="warning"><strong>Warning:</strong> {{.Warning}}</p>
{{- end}}
{{- if .Family}}
<p class="family">{{.Family}}</p>
{{- end}}
{{- if .Notes}}
<ul class="notes">
{{- range .Notes}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- end}}
</section>
{{- end}}
<section id="setup">
<h2>Setup</h2>
<dl class="facts">
{{- range .Facts}}
<dt>{{.Name}}</dt><dd>{{.Value}}</dd>
{{- end}}
</dl>
<p>Threat models of the numbers below (each table row and legend entry names its own):</p>
<ul>
{{- range .Threats}}
<li><strong>{{.Name}}</strong>: the adversary sees {{.Description}}.</li>
{{- else}}
<li>no findings</li>
{{- end}}
</ul>
<p>Higher attack score means world C (the target's record present). Type I error α = P(say C' | C), type II error β = P(say C | C'). Certified bounds hold jointly with probability at least the confidence level; "-" marks a value that is unknown or not applicable. The raw configuration is at the end of the page.</p>
</section>
{{- range .Sections}}
<section id="{{.ID}}">
<h2>{{.Title}}</h2>
<p>{{.Intro}}</p>
{{- template "body" .Shown}}
{{- if .FoldSummary}}
<details class="more" id="more-{{.ID}}">
<summary>{{.FoldSummary}}</summary>
{{- template "body" .Folded}}
</details>
{{- end}}
</section>
{{- end}}
<details id="terms">
<summary>Terms used in this report</summary>
<dl class="terms">
{{- range .Terms}}
<dt>{{.Name}}</dt><dd>{{.Meaning}}</dd>
{{- end}}
</dl>
</details>
<details id="configuration">
<summary>Configuration (raw)</summary>
<pre id="config">{{.Config}}</pre>
</details>
<footer>{{.Generated}}</footer>
</body>
</html>
{{- define "body"}}
{{- if .Figs}}
<div class="figs">
{{- range .Figs}}
<figure id="fig-{{.Name}}"{{if .Wide}} class="wide"{{end}}>
{{- if .Img}}
<img class="gallery" src="{{.Img}}" alt="{{.Title}}"/>
{{- else}}
{{.SVG}}
{{- end}}
<figcaption><strong>{{.Title}}.</strong> {{.Caption}}</figcaption>
</figure>
{{- end}}
</div>
{{- end}}
{{- range .Tables}}
<div class="scroll">
<table id="tab-{{.Name}}">
<caption><strong>{{.Title}}.</strong> {{.Caption}}</caption>
<thead><tr>{{range .Header}}<th scope="col">{{.}}</th>{{end}}</tr></thead>
<tbody>
{{- range .Rows}}
<tr>{{range .}}<td{{if .Class}} class="{{.Class}}"{{end}}>{{.Text}}</td>{{end}}</tr>
{{- else}}
<tr><td colspan="{{len .Header}}">no data</td></tr>
{{- end}}
</tbody>
</table>
</div>
{{- end}}
{{- end}}
`))

type htmlFigure struct {
	Name, Title, Caption string
	SVG                  template.HTML
	Img                  template.URL // a PNG as a data URL, instead of SVG
	Wide                 bool
}

// htmlCell is a table cell; Class is "num" (right-aligned, not wrapped), "short" (a column
// of short words, not wrapped) or "" (long text, wrapped).
type htmlCell struct {
	Text, Class string
}

type htmlTable struct {
	Name, Title, Caption string
	Header               []string
	Rows                 [][]htmlCell
}

type htmlSection struct {
	ID, Title, Intro, FoldSummary string
	Shown, Folded                 htmlBody
}

// htmlBody is the figures and tables of a section, or of its folded part.
type htmlBody struct {
	Figs   []htmlFigure
	Tables []htmlTable
}

// shortCell is the longest cell (in characters) of a column kept on one line: attack names,
// threat models, numbers. Longer texts (claim sources, statuses) wrap.
const shortCell = 24

func (r *rendered) htmlTable(t *table) htmlTable {
	ht := htmlTable{Name: t.name, Title: t.title, Caption: t.caption, Header: t.shown()}
	class := make([]string, len(t.header))
	for i := range class {
		longest := 0
		for _, row := range t.rows {
			longest = max(longest, utf8.RuneCountInString(row[i]))
		}
		switch {
		case t.numeric(i):
			class[i] = "num"
		case longest <= shortCell:
			class[i] = "short"
		}
	}
	for _, row := range t.rows {
		cells := make([]htmlCell, len(row))
		for i, c := range row {
			cells[i] = htmlCell{c, class[i]}
		}
		ht.Rows = append(ht.Rows, cells)
	}
	return ht
}

func (r *rendered) html() ([]byte, error) {
	var secs []htmlSection
	for _, s := range r.sections {
		hs := htmlSection{ID: s.ID, Title: s.Title, Intro: s.Intro}
		body := func(item any) *htmlBody {
			if s.folded[item] {
				hs.FoldSummary = s.foldSummary
				return &hs.Folded
			}
			return &hs.Shown
		}
		for _, f := range s.figs {
			b := body(f)
			b.Figs = append(b.Figs, htmlFigure{Name: f.Name, Title: f.Title, Caption: f.Caption, SVG: inlineSVG(r.svgs[f]), Wide: f.Wide})
		}
		for _, f := range s.images {
			// A data URL of our own PNG bytes: safe for the src attribute.
			url := template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(f.png))
			b := body(f)
			b.Figs = append(b.Figs, htmlFigure{Name: f.name, Title: f.title, Caption: f.caption, Img: url, Wide: true})
		}
		for _, t := range s.tables {
			b := body(t)
			b.Tables = append(b.Tables, r.htmlTable(t))
		}
		secs = append(secs, hs)
	}
	title := r.in.Title
	if title == "" {
		title = "Privacy audit report"
	}
	var b bytes.Buffer
	err := pageTemplate.Execute(&b, map[string]any{
		"Title": title, "CSS": template.CSS(pageCSS), "Facts": r.facts(), "Threats": r.threats(),
		"Config": prettyConfig(r.in.ConfigJSON), "Sections": secs, "Generated": r.in.Generated,
		"Headline": r.headline(), "Terms": terms,
	})
	if err != nil {
		return nil, fmt.Errorf("report: html: %w", err)
	}
	return b.Bytes(), nil
}

func (r *rendered) markdown() []byte {
	var b strings.Builder
	title := r.in.Title
	if title == "" {
		title = "Privacy audit report"
	}
	b.WriteString("# " + title + "\n\n")
	if h := r.headline(); h != nil {
		fmt.Fprintf(&b, "**%s**: %s\n\n", h.Badge, markdownEscaper.Replace(h.Text))
		if h.Warning != "" {
			fmt.Fprintf(&b, "**Warning**: %s\n\n", markdownEscaper.Replace(h.Warning))
		}
		if h.Family != "" {
			b.WriteString(h.Family + "\n\n")
		}
		for _, n := range h.Notes {
			fmt.Fprintf(&b, "- note: %s\n", markdownEscaper.Replace(n))
		}
		if len(h.Notes) > 0 {
			b.WriteString("\n")
		}
	}
	b.WriteString("## Setup\n\n")
	for _, f := range r.facts() {
		fmt.Fprintf(&b, "- **%s**: %s\n", f.Name, markdownEscaper.Replace(f.Value))
	}
	b.WriteString("\nThreat models of the numbers below (each table row and legend entry names its own):\n\n")
	for _, t := range r.threats() {
		fmt.Fprintf(&b, "- **%s**: the adversary sees %s.\n", t.Name, t.Description)
	}
	if len(r.m.threats) == 0 {
		b.WriteString("- no findings\n")
	}
	b.WriteString("\nHigher attack score means world C (the target's record present). Type I error α = P(say C' | C), type II error β = P(say C | C'). Certified bounds hold jointly with probability at least the confidence level; \"-\" marks a value that is unknown or not applicable. The raw configuration is at the end.\n")
	for _, s := range r.sections {
		b.WriteString("\n## " + s.Title + "\n\n" + s.Intro + "\n")
		for _, f := range s.figs {
			fmt.Fprintf(&b, "\n![%s](%s)\n\n*%s.* %s\n", f.Title, relLink(expdir.Dir("").Figure(f.Name, "svg")), f.Title, f.Caption)
		}
		for _, f := range s.images {
			fmt.Fprintf(&b, "\n![%s](%s)\n\n*%s.* %s\n", f.title, relLink(expdir.Dir("").Figure(f.name, "png")), f.title, f.caption)
		}
		for _, t := range s.tables {
			fmt.Fprintf(&b, "\n**%s.** %s (also [CSV](%s), [LaTeX](%s))\n\n", t.title, t.caption,
				relLink(expdir.Dir("").Table(t.name, "csv")), relLink(expdir.Dir("").Table(t.name, "tex")))
			if len(t.rows) == 0 {
				b.WriteString("No data.\n")
				continue
			}
			b.WriteString(t.markdown())
		}
	}
	b.WriteString("\n## Terms used in this report\n\n")
	for _, t := range terms {
		b.WriteString("- **" + t.Name + "**: " + t.Meaning + "\n")
	}
	b.WriteString("\n## Configuration\n\n```json\n" + prettyConfig(r.in.ConfigJSON) + "\n```\n")
	if r.in.Generated != "" {
		b.WriteString("\n---\n\n" + r.in.Generated + "\n")
	}
	return []byte(b.String())
}

// Write renders the report into dir: report.html (self-contained: figures inline, CSS
// inline, no scripts), report.md, figures/*.svg (and *.png with opts.PNG) and tables/*.csv
// and *.tex. The files depend on in alone, so the same input gives the same bytes.
func Write(dir string, in Input, opts Options) error {
	r, err := build(&in)
	if err != nil {
		return err
	}
	files := map[string][]byte{}
	page, err := r.html()
	if err != nil {
		return err
	}
	d := expdir.Dir(dir)
	files[d.ReportHTML()] = page
	files[d.ReportMarkdown()] = r.markdown()
	for _, f := range r.figs {
		files[d.Figure(f.Name, "svg")] = r.svgs[f]
		if opts.PNG {
			b, err := f.PNG()
			if err != nil {
				return fmt.Errorf("report: %w", err)
			}
			files[d.Figure(f.Name, "png")] = b
		}
	}
	for _, f := range r.images {
		files[d.Figure(f.name, "png")] = f.png
	}
	for _, t := range r.tables {
		c, err := t.csv()
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		files[d.Table(t.name, "csv")] = c
		files[d.Table(t.name, "tex")] = t.latex(r.in.Name)
	}
	for _, sub := range []string{d.Figures(), d.Tables()} {
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	for p, b := range files {
		// Through a temporary file and a rename: a killed process never leaves half a report.
		if err := fsutil.WriteFile(p, b); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	return nil
}

// relLink is a path relative to the experiment directory as a Markdown link writes it.
func relLink(path string) string { return filepath.ToSlash(path) }
