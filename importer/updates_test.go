package importer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/ingest"
)

// An update file is finite and so is w_{t-1}, but their sum, the upload the import records,
// need not be: it is refused as a non-finite upload, naming the file, not written to the run
// file as an infinite model (which docs/import.md says is refused).
func TestUpdatePlusPreviousModelFinite(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "u.npy")
	b, err := ingest.WriteNPY([]int{2}, []float32{3e38, 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var lay Layout
	lay.add("w", 2)
	rd := &reader{lay: lay, opts: Options{UploadUpdates: true}, plan: &Plan{Pairs: 1, Rounds: []int{0, 1},
		Files:   [][2][]string{{{"", ""}, {"", ""}}},
		Uploads: [][2][]string{{{"", file}, {"", ""}}}}}
	_, up, _, errs := rd.readRun(0, 1, []float32{3e38, 2})
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "u.npy (upload of pair 0, world C, round 1)") || !strings.Contains(errs[1].Error(), "+Inf") {
		t.Fatalf("upload %v, error %v; want the infinite sum refused", up, errs[1])
	}
}
