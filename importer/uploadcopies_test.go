package importer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Copies of one pair's upload files listed for other pairs (links, or an export script that
// wrote one pair's uploads for all) passed silently: the global models differ, so checkCopies
// saw nothing, and the uploads observer audited the copies as independent uploads (a consistent
// audit read VIOLATED, upload-lda's mu lower bound 0 -> 0.52). After a noisy round the uploads
// of different pairs never agree bit for bit, so the import warns, naming both files; it
// cannot refuse them, since uploads without noise (the zoo's noise-on-average bug) agree the
// same way and are for audit check to find. Honest uploads, as models or as updates, import
// without the warning.
func TestCopiedUploadsWarned(t *testing.T) {
	cfg := parse(t, uploadYAML)
	own := trainOwn(t, cfg)
	// Pairs 3 and 4 list pair 0's upload files of round 2 as theirs, in both worlds.
	copyUploads := func(t *testing.T, snap string) {
		for _, p := range []int{3, 4} {
			for w := range 2 {
				src := filepath.Join(snap, fmt.Sprintf("p000_w%d_r2_up.safetensors", w))
				dst := filepath.Join(snap, fmt.Sprintf("p%03d_w%d_r2_up.safetensors", p, w))
				if err := os.Remove(dst); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(src, dst); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	cases := []struct {
		name    string
		updates bool
		copied  bool
		want    []string // empty: no warning of copies
	}{
		{"honest models", false, false, nil},
		{"honest updates", true, false, nil},
		// Pair 0's worlds upload the same model at round 2 (they share their noise, and the
		// canary left the target's update unchanged): one group of six runs, one warning, the
		// two worlds of pair 0 not counted as copies of each other.
		{"copied models", false, true, []string{
			"round 2: the uploads of pair 0 world C (", "p000_w0_r2_up.safetensors) and pair 3 world C (",
			"p003_w0_r2_up.safetensors) are the same bit for bit (and 3 more runs of other pairs)",
			"copies of one upload", "or the uploads carry no noise, which audit check tests"}},
		// Update files are compared as read: the uploads made of them with each pair's own
		// w_1 differ, the files do not.
		{"copied updates", true, true, []string{"round 2: the uploads of pair 0 world C (", "(and 3 more runs of other pairs)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			snap := t.TempDir()
			path := exportSnapshots(t, cfg, own, snap, c.updates)
			if c.copied {
				copyUploads(t, snap)
			}
			m, err := ReadManifest(path)
			if err != nil {
				t.Fatal(err)
			}
			imp := filepath.Join(t.TempDir(), "imported")
			res, err := Import(context.Background(), Options{Manifest: m, Config: cfg, Out: imp, UploadUpdates: c.updates, Workers: 2, Warnf: func(string, ...any) {}})
			if err != nil {
				t.Fatalf("import: %v", err)
			}
			warned := strings.Join(res.Warnings, "\n")
			if len(c.want) == 0 {
				if strings.Contains(warned, "same bit for bit") {
					t.Fatalf("honest uploads warned of: %s", warned)
				}
				return
			}
			for _, w := range c.want {
				if !strings.Contains(warned, w) {
					t.Errorf("warnings %q, want one containing %q", warned, w)
				}
			}
		})
	}
}
