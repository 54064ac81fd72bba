package export

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/importer"
	"github.com/fedaudit/fedaudit/ingest"
	"github.com/fedaudit/fedaudit/internal/fsutil"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train/model"
)

// Files the snapshot export writes beside the snapshots.
const (
	ManifestFile = "manifest.csv"
	ConfigFile   = "config.json"
)

// Snapshots writes every checkpoint of every run of experiment directory dir as a safetensors
// snapshot of the global model, and every recorded upload of the target client as one more, into
// out, with the manifest and the config that `audit import` reads back (docs/import.md): the
// form a trainer elsewhere would hand over, so fedaudit's own runs can be audited through the
// import path. Tensors are named after the model's layout ("layer.1.weight", ...) and written in
// its order; an external model's vector is one tensor "params". The run files must hold the
// parameters (train.record_params); out must not exist or be empty. It returns the manifest's
// and the config's paths.
func Snapshots(ctx context.Context, dir, out string) ([]string, error) {
	if ents, err := os.ReadDir(out); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("export: %s exists and is not empty", out)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("export: %w", err)
	}
	tab, err := runs.Open(expdir.Dir(dir).Runs())
	if err != nil {
		return nil, err
	}
	defer tab.Close()
	meta := tab.Meta()
	if meta.Canaries > 0 {
		return nil, fmt.Errorf("export: %s carries %d canaries per run, which snapshots and their manifest cannot hold (an import of them would lose the one-run audit)", expdir.Dir(dir).Runs(), meta.Canaries)
	}
	if !meta.HasParams {
		return nil, fmt.Errorf("export: %s holds no parameters (train.record_params was off): there is nothing to export as snapshots", expdir.Dir(dir).Runs())
	}
	cfgJSON, err := os.ReadFile(expdir.Dir(dir).Config())
	if errors.Is(err, os.ErrNotExist) {
		cfgJSON, err = meta.Config, nil
	}
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	cfg, err := spec.FromJSON(cfgJSON)
	if err != nil {
		return nil, fmt.Errorf("export: %s: %w", expdir.Dir(dir).Config(), err)
	}
	slots, err := snapshotSlots(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	lines := []string{"file,world,pair,round,client,canary,diverged"}
	// The canary column lets the import check the world labels: fedaudit's canary is in C',
	// and under the remove adjacencies C holds the record (or client) that C' lacks.
	canaryWorld := cfg.Adjacency.DifferingWorld()
	write := func(name string, v []float32) error {
		ts := make([]ingest.Tensor, len(slots))
		for i, s := range slots {
			shape := s.Shape
			if len(shape) == 1 && shape[0] < 0 {
				shape = []int{len(v)} // an external model's whole vector
			}
			n := 1
			for _, d := range shape {
				n *= d
			}
			if s.Offset+n > len(v) {
				return fmt.Errorf("export: a run file vector has %d values, the model's layout needs more", len(v))
			}
			ts[i] = ingest.Tensor{Name: strings.ReplaceAll(s.Role, " ", "."), Shape: shape, Data: v[s.Offset : s.Offset+n]}
		}
		b, err := ingest.WriteSafetensors(ts, map[string]string{"format": "pt", "source": "fedaudit export"})
		if err != nil {
			return err
		}
		return writeSynced(filepath.Join(out, name), b)
	}
	target := cfg.Adjacency.Client
	err = tab.Scan(ctx, func(r runs.Row) error {
		world := "C"
		if r.World == runs.WorldCPrime {
			world = "Cprime"
		}
		name := fmt.Sprintf("p%05d_%s_r%04d.safetensors", r.PairID, world, r.Round)
		if err := write(name, r.Params); err != nil {
			return err
		}
		canary := r.World == canaryWorld
		// diverged keeps the trainer's flag through the import: the analysis judges such runs.
		lines = append(lines, fmt.Sprintf("%s,%s,%d,%d,,%v,%v", name, world, r.PairID, r.Round, canary, r.Diverged))
		if meta.HasUpload && !runs.UploadAbsent(r.Upload) {
			name := fmt.Sprintf("p%05d_%s_r%04d_client%d.safetensors", r.PairID, world, r.Round, target)
			if err := write(name, r.Upload); err != nil {
				return err
			}
			lines = append(lines, fmt.Sprintf("%s,%s,%d,%d,%d,%v,", name, world, r.PairID, r.Round, target, canary))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	cfgPath, manPath := filepath.Join(out, ConfigFile), filepath.Join(out, ManifestFile)
	if err := fsutil.WriteFile(cfgPath, append(cfg.JSON(), '\n')); err != nil {
		return nil, err
	}
	// The manifest last: a manifest names only snapshots that are complete, on disk too (each
	// was synced, and so is the folder that names them), so no crash leaves it naming empty
	// files.
	fsutil.SyncDir(out)
	if err := fsutil.WriteFile(manPath, []byte(strings.Join(lines, "\n")+"\n")); err != nil {
		return nil, err
	}
	return []string{manPath, cfgPath}, nil
}

// snapshotSlots is the layout the snapshots are written in: the model's, or one flat tensor for
// an external model (whose tensors the run files do not name).
func snapshotSlots(ctx context.Context, cfg *spec.Config) ([]importer.Slot, error) {
	if cfg.Train.Model.Kind == model.External {
		return []importer.Slot{{Role: "params", Shape: []int{-1}}}, nil
	}
	data, err := spec.PrepareContext(ctx, cfg)
	if err != nil {
		return nil, err
	}
	lay, err := importer.LayoutOf(cfg.Train.Model, data.Pair.C[0].Shape, data.Classes)
	if err != nil {
		return nil, err
	}
	return lay.Slots, nil
}

// writeSynced writes data to path and flushes it to disk before returning.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
