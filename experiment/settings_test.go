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

// TestDeltaKeepsTheConfiguredClaim: a configuration's claim_epsilon is stated at its delta.
// --delta used to replace that delta in the claim, so `audit report --delta 1e-9` judged
// epsilon 3 at 1e-9, a claim the deployment never made (a mechanism whose claim holds at 1e-2
// is VIOLATED at 1e-9), and recorded it in config.json for every later stage. The claim now
// keeps its delta (audit.claim_delta once --delta is recorded) and --delta sets eps_lower's.
func TestDeltaKeepsTheConfiguredClaim(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.Audit.ClaimEpsilon, cfg.Audit.Delta = 3, 1e-3
	if err := writeDirConfig(dir, cfg); err != nil {
		t.Fatal(err)
	}
	o := AnalyzeOptions{Delta: 1e-9}.withDefaults(cfg)
	if o.Claim.Epsilon != 3 || o.Claim.Delta != 1e-3 || o.Delta != 1e-9 {
		t.Errorf("--delta 1e-9: claim %+v, delta %g; want epsilon 3 at 1e-3 and eps_lower at 1e-9", o.Claim, o.Delta)
	}
	if len(o.Notes) != 2 || o.Notes[1] != "claim: epsilon 3 is judged at delta 0.001, the delta it is stated at; eps_lower is given at delta 1e-09" {
		t.Errorf("notes %q", o.Notes)
	}
	// The heuristic the verdicts table divides the claim's eps by is at the claim's delta too.
	if d := o.heuristicDelta(); d != 1e-3 {
		t.Errorf("the heuristic's delta %g, want the claim's 1e-3", d)
	}
	if d := (AnalyzeOptions{Claim: audit.Claim{Mu: 1}, Delta: 1e-9}).heuristicDelta(); d != 1e-9 {
		t.Errorf("with a claimed mu the heuristic's delta is %g, want the analysis's 1e-9", d)
	}
	// AnalyzeAll resolves the options again: the note stays one (the headline had it twice).
	if again := o.withDefaults(nil); len(again.Notes) != 2 {
		t.Errorf("resolved twice, notes %q", again.Notes)
	}
	if changed, err := RecordSettings(dir, AnalyzeOptions{Delta: 1e-9}); err != nil || !changed {
		t.Fatalf("RecordSettings: changed %v, %v", changed, err)
	}
	own, err := readDirConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if own.Audit.Delta != 1e-9 || own.Audit.ClaimDelta != 1e-3 || own.Validate() != nil {
		t.Errorf("recorded audit settings %+v (%v)", own.Audit, own.Validate())
	}
	if later := (AnalyzeOptions{}).withDefaults(own); later.Claim.Epsilon != 3 || later.Claim.Delta != 1e-3 || later.Delta != 1e-9 {
		t.Errorf("a later stage judges claim %+v with eps_lower at %g", later.Claim, later.Delta)
	}
	// The claim restated with --claim-eps and no --delta stays at its delta, recorded or not
	// (it was judged at the recorded delta of eps_lower, and the claim's erased).
	o = AnalyzeOptions{Claim: audit.Claim{Epsilon: 3}}.withDefaults(own)
	if o.Claim.Delta != 1e-3 {
		t.Errorf("--claim-eps 3 without --delta judged at %g, want the claim's 1e-3", o.Claim.Delta)
	}
	if _, err := RecordSettings(dir, AnalyzeOptions{Claim: audit.Claim{Epsilon: 3}}); err != nil {
		t.Fatal(err)
	}
	if own, err = readDirConfig(dir); err != nil || own.Audit.ClaimDelta != 1e-3 {
		t.Errorf("--claim-eps 3 without --delta recorded %+v (%v)", own.Audit, err)
	}
	// A claim given with --claim-eps and --delta (the CLI sets both) is at that delta, and
	// replaces the configured one whole.
	if _, err := RecordSettings(dir, AnalyzeOptions{Claim: audit.Claim{Epsilon: 2, Delta: 1e-6}, Delta: 1e-6}); err != nil {
		t.Fatal(err)
	}
	if own, err = readDirConfig(dir); err != nil {
		t.Fatal(err)
	}
	if a := own.Audit; a.ClaimEpsilon != 2 || a.ClaimDelta != 0 || a.Delta != 1e-6 {
		t.Errorf("after --claim-eps 2 --delta 1e-6: %+v", a)
	}
}
