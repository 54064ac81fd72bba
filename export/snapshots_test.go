package export

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/experiment/spec"
)

// The manifest's canary column follows fedaudit's convention, which the import checks: the
// canary is in C' (replace), while under remove-client C holds the client that C' lacks.
func TestSnapshotsCanaryColumn(t *testing.T) {
	removeClient := `name: export-remove-client
seed: 7
pairs: 2
data: {source: synthetic, clients: 4, per_client: 3}
adjacency: {kind: remove-client, client: 1, index: 0}
train:
  algorithm: dp-fedavg
  model: {kind: quadratic, curvature: 1}
  rounds: 2
  local_steps: 1
  learning_rate: 0.5
  sampling_rate: 0.5
  noise_multiplier: 1
  update_clip: 0.1
  checkpoints: [0, 2]
  record_params: true
`
	replace := strings.Replace(cfgYAML, "  informed: true\n", "  informed: true\n  record_params: true\n", 1)
	for _, c := range []struct {
		name, yaml, canaryWorld string
	}{{"replace", replace, "Cprime"}, {"remove-client", removeClient, "C"}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			cfg, err := spec.Parse([]byte(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if _, err := experiment.Run(ctx, cfg, dir, experiment.RunOptions{}); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "snap")
			if _, err := Snapshots(ctx, dir, out); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(filepath.Join(out, ManifestFile))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			rows, err := csv.NewReader(f).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			col := map[string]int{}
			for i, h := range rows[0] {
				col[h] = i
			}
			if _, ok := col["canary"]; !ok {
				t.Fatalf("header %v lacks canary", rows[0])
			}
			worlds := map[string]int{}
			for _, r := range rows[1:] {
				w := r[col["world"]]
				worlds[w]++
				if want := strconv.FormatBool(w == c.canaryWorld); r[col["canary"]] != want {
					t.Errorf("row %v: canary %s, want %s (the canary is in %s)", r, r[col["canary"]], want, c.canaryWorld)
				}
			}
			if worlds["C"] == 0 || worlds["Cprime"] == 0 {
				t.Fatalf("rows per world %v, want both", worlds)
			}
		})
	}
}
