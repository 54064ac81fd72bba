package experiment

import (
	"testing"

	"github.com/fedaudit/fedaudit/audit"
)

// RecordSettings records the split method's seed given on the command line (audit.split_seed),
// as it records the other statistics settings, so that a later stage of the directory, which
// takes its settings from config.json, divides the scores with the same seed.
func TestRecordSettingsRecordsSplitSeed(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	if err := writeDirConfig(dir, cfg); err != nil {
		t.Fatal(err)
	}
	changed, err := RecordSettings(dir, AnalyzeOptions{Method: audit.Split, Seed: cfg.Seed + 41})
	if err != nil {
		t.Fatal(err)
	}
	own, err := readDirConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if later := (AnalyzeOptions{}).withDefaults(own); !changed || later.Seed != cfg.Seed+41 || later.Method != audit.Split {
		t.Errorf("after RecordSettings with --seed %d: changed %v, a later stage uses seed %d and method %s", cfg.Seed+41, changed, later.Seed, later.Method)
	}
	if note := (AnalyzeOptions{Method: audit.Split, Seed: 5}).unrecordedSeed(own, dir); note != "" {
		t.Errorf("a recorded seed is noted as unrecorded: %s", note)
	}
	// The master seed given explicitly changes nothing.
	if err := writeDirConfig(dir, cfg); err != nil {
		t.Fatal(err)
	}
	if changed, err := RecordSettings(dir, AnalyzeOptions{Seed: cfg.Seed}); err != nil || changed {
		t.Errorf("--seed of the master seed: changed %v, %v", changed, err)
	}
}
