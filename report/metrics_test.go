package report

import (
	"regexp"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/attacks"
)

// TestMetricLabels: every metric an attack registers has a name for readers, PSNR with its
// unit; a key report does not know is shown as it is.
func TestMetricLabels(t *testing.T) {
	for _, info := range attacks.Names() {
		for _, key := range info.Metrics {
			if metricLabel(key) == key {
				t.Errorf("attack %s's metric %q has no label: the tables would show the raw key", info.Name, key)
			}
		}
	}
	if got := metricLabel(attacks.MetricPSNR); !strings.Contains(got, "(dB)") {
		t.Errorf("PSNR is labelled %q, without its unit", got)
	}
	if got := metricLabel("new_metric"); got != "new_metric" {
		t.Errorf("an unknown metric is labelled %q, want its key", got)
	}
}

// TestMetricsTableHeaders: the attack success metrics table named its columns by the metrics'
// keys everywhere (inversion_psnr, with no unit). The HTML page, report.md and the LaTeX table
// now name them for readers (PSNR (dB), SSIM, ...), while the CSV keeps the keys programs read.
func TestMetricsTableHeaders(t *testing.T) {
	in := syntheticInput(t)
	for i := range in.Findings {
		if in.Findings[i].Metrics != nil {
			in.Findings[i].Metrics = map[string]float64{attacks.MetricPSNR: 21.5, attacks.MetricSSIM: 0.42, attacks.MetricL2: 3.1,
				attacks.MetricMSE: 0.007, attacks.MetricLabelAccuracy: 0.5, attacks.MetricLLGCountError: 2, "new_metric": 1}
		}
	}
	_, files := writeReport(t, in, Options{})
	keys := "Attack,Threat model,T,inversion_l2,inversion_mse,inversion_psnr,inversion_ssim,label_accuracy,llg_count_error,new_metric"
	if got, _, _ := strings.Cut(string(files["tables/attack_metrics.csv"]), "\n"); got != keys {
		t.Errorf("attack_metrics.csv header\n%s\nwant the metrics' keys\n%s", got, keys)
	}
	labels := []string{"Attack", "Threat model", "T", "L2", "MSE", "PSNR (dB)", "SSIM", "Label accuracy", "LLG label count error", "new_metric"}
	md := "| " + strings.Join(labels, " | ") + " |\n"
	if !strings.Contains(string(files["report.md"]), md) {
		t.Errorf("report.md lacks the metrics header %q", md)
	}
	tex := strings.Join(labels, " & ") + ` \\` + "\n"
	tex = strings.ReplaceAll(tex, "new_metric", `new\_metric`)
	if !strings.Contains(string(files["tables/attack_metrics.tex"]), tex) {
		t.Errorf("attack_metrics.tex lacks the header %q:\n%s", tex, files["tables/attack_metrics.tex"])
	}
	html := string(files["report.html"])
	start := strings.Index(html, `id="tab-attack_metrics"`)
	if start < 0 {
		t.Fatal("report.html has no attack metrics table")
	}
	var ths []string
	for _, m := range regexp.MustCompile(`<th scope="col">([^<]*)</th>`).FindAllStringSubmatch(html[start:], len(labels)) {
		ths = append(ths, m[1])
	}
	if got, want := strings.Join(ths, "|"), strings.Join(labels, "|"); got != want {
		t.Errorf("report.html's metrics header\n%s\nwant\n%s", got, want)
	}
	for _, name := range []string{"report.md", "tables/attack_metrics.tex", "report.html"} {
		for _, key := range []string{"inversion_psnr", `inversion\_psnr`, "label_accuracy", `label\_accuracy`} {
			if strings.Contains(string(files[name]), key) {
				t.Errorf("%s shows the raw key %s", name, key)
			}
		}
	}
}
