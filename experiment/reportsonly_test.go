package experiment

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A directory that kept its findings and report but not its run files (as results/ commits
// them) says what is missing and how to rebuild it, instead of a bare "no such file"; a
// directory without findings keeps the plain error.
func TestAnalyzeReportsOnlyDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "findings.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("name: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := AnalyzeDir(context.Background(), dir, AnalyzeOptions{}, AttackOptions{})
	if err == nil || !strings.Contains(err.Error(), "no run files") || !strings.Contains(err.Error(), "make results") ||
		!strings.Contains(err.Error(), "--config "+filepath.Join(dir, "config.yaml")) {
		t.Errorf("err = %v", err)
	}
	empty := t.TempDir()
	if _, err := AnalyzeDir(context.Background(), empty, AnalyzeOptions{}, AttackOptions{}); err == nil || strings.Contains(err.Error(), "make results") {
		t.Errorf("empty directory: err = %v", err)
	}
}
