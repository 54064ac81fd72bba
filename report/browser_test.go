package report

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const chromiumPath = "/usr/bin/chromium"

// runChromium runs headless chromium on the page with extra arguments and returns its
// stdout and stderr. Each run gets a fresh profile and no network-facing features, so the
// result depends on the page alone.
func runChromium(t *testing.T, page string, args ...string) (stdout, stderr []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0"}
	cmd := exec.CommandContext(ctx, chromiumPath, append(append(base, args...), "file://"+page)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\nstderr:\n%s", args, err, errb.Bytes())
	}
	return out.Bytes(), errb.Bytes()
}

// consoleErrors returns the lines of chromium's log that report a problem of the page: a
// console message or an uncaught exception.
func consoleErrors(stderr []byte) []string {
	var bad []string
	for _, line := range strings.Split(string(stderr), "\n") {
		if strings.Contains(line, "CONSOLE") || strings.Contains(line, "Uncaught") {
			bad = append(bad, line)
		}
	}
	return bad
}

// TestBrowser renders the report in headless chromium and checks the DOM it builds (every
// figure an inline SVG, every table present) and that the page logged no errors. Without
// chromium it skips, unless FEDAUDIT_REQUIRE_BROWSER=1 (as in CI), where it fails.
// FEDAUDIT_SCREENSHOT=path keeps the screenshot for a person to look at.
func TestBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("FEDAUDIT_REQUIRE_BROWSER") == "1" {
			t.Fatalf("FEDAUDIT_REQUIRE_BROWSER=1 but %s is unusable: %v", chromiumPath, err)
		}
		t.Skipf("%s not found; install chromium (or set FEDAUDIT_REQUIRE_BROWSER=1 to make this a failure)", chromiumPath)
	}
	if testing.Short() && os.Getenv("FEDAUDIT_REQUIRE_BROWSER") != "1" {
		t.Skip("browser check takes several seconds; skipped in -short mode")
	}
	dir, files := writeReport(t, syntheticInput(t), Options{})
	page, err := filepath.Abs(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}

	dom, stderr := runChromium(t, page, "--dump-dom")
	if bad := consoleErrors(stderr); len(bad) > 0 {
		t.Errorf("console errors while loading the page:\n%s", strings.Join(bad, "\n"))
	}
	els := htmlDOMElements(dom)
	nSVG := 0
	for name := range files {
		if strings.HasPrefix(name, "figures/") && strings.HasSuffix(name, ".svg") {
			nSVG++
			fig := strings.TrimSuffix(strings.TrimPrefix(name, "figures/"), ".svg")
			if !bytes.Contains(dom, []byte(`<figure id="fig-`+fig+`"`)) {
				t.Errorf("rendered DOM lacks figure %s", fig)
			}
		}
	}
	if els["svg"] != nSVG || nSVG == 0 {
		t.Errorf("rendered DOM has %d <svg>, want %d", els["svg"], nSVG)
	}
	if els["table"] != 7 {
		t.Errorf("rendered DOM has %d <table>, want 7", els["table"])
	}
	for _, tb := range []string{"auc", "tpr_at_1pct_fpr", "mu_lower", "attacks", "verdicts", "rounds", "attack_metrics"} {
		if !bytes.Contains(dom, []byte(`<table id="tab-`+tb+`">`)) {
			t.Errorf("rendered DOM lacks table %s", tb)
		}
	}
	if i, j := bytes.Index(dom, []byte(`<section id="headline"`)), bytes.Index(dom, []byte(`<section id="setup"`)); i < 0 || i > j {
		t.Error("rendered DOM does not open with the headline")
	}
	if !bytes.Contains(dom, []byte(`<details id="configuration">`)) {
		t.Error("rendered DOM lacks the folded configuration")
	}
	if bytes.Contains(dom, []byte("NaN")) {
		t.Error("rendered DOM contains NaN")
	}

	shot := filepath.Join(t.TempDir(), "report.png")
	if keep := os.Getenv("FEDAUDIT_SCREENSHOT"); keep != "" {
		shot = keep
	}
	_, stderr = runChromium(t, page, "--screenshot="+shot, "--window-size=1280,4000", "--hide-scrollbars")
	if bad := consoleErrors(stderr); len(bad) > 0 {
		t.Errorf("console errors while taking the screenshot:\n%s", strings.Join(bad, "\n"))
	}
	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	// A blank 1280x4000 page compresses to a few kilobytes; figures and tables make it far
	// larger. 50 kB is well below what this report gives and far above a blank page.
	if !bytes.HasPrefix(png, []byte("\x89PNG")) || len(png) < 50_000 {
		t.Errorf("screenshot is not a PNG of a rendered page (%d bytes)", len(png))
	}
}

// htmlDOMElements counts the start tags in chromium's serialized DOM by element name. The
// serialization is regular (lower-case names, quoted attributes), so scanning for "<name"
// followed by a space or ">" is enough.
func htmlDOMElements(dom []byte) map[string]int {
	counts := map[string]int{}
	s := string(dom)
	for i := 0; i < len(s); i++ {
		if s[i] != '<' || i+1 >= len(s) || !(s[i+1] >= 'a' && s[i+1] <= 'z') {
			continue
		}
		j := i + 1
		for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9' || s[j] == '-') {
			j++
		}
		if j < len(s) && (s[j] == ' ' || s[j] == '>' || s[j] == '/') {
			counts[s[i+1:j]]++
		}
	}
	return counts
}

// TestBrowserGallery loads a report with a gallery in headless chromium: the DOM holds the
// gallery's figure with the PNG inline as a data URL, and the page logs no errors. Skipped as
// TestBrowser is.
func TestBrowserGallery(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("FEDAUDIT_REQUIRE_BROWSER") == "1" {
			t.Fatalf("FEDAUDIT_REQUIRE_BROWSER=1 but %s is unusable: %v", chromiumPath, err)
		}
		t.Skipf("%s not found", chromiumPath)
	}
	if testing.Short() && os.Getenv("FEDAUDIT_REQUIRE_BROWSER") != "1" {
		t.Skip("browser check takes several seconds; skipped in -short mode")
	}
	in := syntheticInput(t)
	in.Gallery = testGallery()
	dir, _ := writeReport(t, in, Options{})
	page, err := filepath.Abs(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	dom, stderr := runChromium(t, page, "--dump-dom")
	if bad := consoleErrors(stderr); len(bad) > 0 {
		t.Errorf("console errors while loading the page:\n%s", strings.Join(bad, "\n"))
	}
	for _, want := range []string{`<section id="gallery">`, `<figure id="fig-gallery" class="wide">`, `<img class="gallery" src="data:image/png;base64,iVBORw0KGgo`} {
		if !bytes.Contains(dom, []byte(want)) {
			t.Errorf("rendered DOM lacks %s", want)
		}
	}
}

// pageHeight loads page (a copy with a script appended that records the document's height at
// a 1200-pixel-wide window) in headless chromium and returns the height in CSS pixels.
func pageHeight(t *testing.T, page []byte) int {
	t.Helper()
	probe := `<script>window.onload = function () { document.body.setAttribute("data-height", document.documentElement.scrollHeight); };</script></body>`
	copyPath := filepath.Join(t.TempDir(), "probe.html")
	if err := os.WriteFile(copyPath, bytes.Replace(page, []byte("</body>"), []byte(probe), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	dom, _ := runChromium(t, copyPath, "--dump-dom", "--window-size=1200,800", "--virtual-time-budget=5000")
	i := bytes.Index(dom, []byte(`data-height="`))
	if i < 0 {
		t.Fatal("no height recorded")
	}
	rest := dom[i+len(`data-height="`):]
	h, err := strconv.Atoi(string(rest[:bytes.IndexByte(rest, '"')]))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestBrowserFolded: the folded parts (the tables that repeat the verdict table's bounds, the
// trade-off figures at all but the last checkpoint) are closed when the page opens, so the
// page as written is at most 75% as tall as the same page with every <details> open (on this
// small input; the demo's report goes from 12,100 to 5,900 px). Skipped
// as TestBrowser is.
func TestBrowserFolded(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("FEDAUDIT_REQUIRE_BROWSER") == "1" {
			t.Fatalf("FEDAUDIT_REQUIRE_BROWSER=1 but %s is unusable: %v", chromiumPath, err)
		}
		t.Skipf("%s not found", chromiumPath)
	}
	if testing.Short() && os.Getenv("FEDAUDIT_REQUIRE_BROWSER") != "1" {
		t.Skip("browser check takes several seconds; skipped in -short mode")
	}
	_, files := writeReport(t, syntheticInput(t), Options{})
	page := files["report.html"]
	folded := pageHeight(t, page)
	open := pageHeight(t, bytes.ReplaceAll(page, []byte("<details "), []byte("<details open ")))
	t.Logf("page height %d px folded, %d px with every part open", folded, open)
	if float64(folded) > 0.75*float64(open) {
		t.Errorf("page is %d px tall as written, %d px open: the folded parts are not folded", folded, open)
	}
}
