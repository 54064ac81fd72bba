package experiment

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/claims"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/runs"
)

const dpFedAvgYAML = `
name: dp-fedavg-test
seed: 303
pairs: 1000
data:
  source: synthetic
  synthetic: {dim: 8, classes: 2, separation: 4, noise: 1}
  clients: 10
  per_client: 8
  split: dirichlet
  dirichlet_alpha: 0.1
adjacency: {kind: remove-client, client: 0, index: 0}
train:
  algorithm: dp-fedavg
  model: {kind: quadratic, curvature: 1}
  rounds: 10
  local_steps: 2
  learning_rate: 0.5
  sampling_rate: 0.5
  noise_multiplier: 1.5
  update_clip: 1
  checkpoints: [10]
  informed: true
audit:
  attacks: [informed-all]
`

// TestDPFedAvgClaims audits DP-FedAvg against its accountant's claim on the quadratic model,
// whose clipped updates reach the clip norm (so the sensitivity is attained): the correct
// deployment is consistent, and the one whose accountant assumes q = 0.02 instead of 0.5 (claim
// 0.51 instead of 6.45 at delta 1e-5) is violated at 95% confidence (its certified
// epsilon is 1.01 with 1000 pairs), and so is the one that skips update clipping (clip 0.05,
// z = 4: claim 1.83, certified 3.10, the unclipped updates being about 20 times the clip norm).
func TestDPFedAvgClaims(t *testing.T) {
	for _, c := range []struct {
		name, extra string
		want        audit.Status
		claimLo     float64
		claimHi     float64
	}{
		{"correct", "", audit.Consistent, 6.4, 6.5},
		{"wrong-rate", "  claim_sampling_rate: 0.02\n", audit.Violated, 0.5, 0.52},
		{"no-clip", "", audit.Violated, 1.8, 1.9},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw := dpFedAvgYAML + c.extra
			if c.name == "no-clip" {
				// The updates are no longer clipped to 1, while noise and claim still assume it;
				// a small clip norm makes the unclipped updates 20 times over it.
				raw = strings.Replace(raw, "update_clip: 1", "update_clip: 0.05\n  skip_update_clip: true", 1)
				raw = strings.Replace(raw, "noise_multiplier: 1.5", "noise_multiplier: 4", 1)
			}
			cfg, err := spec.Parse([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			findings, err := runFindings(cfg, t.TempDir(), RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(findings) != 1 || findings[0].Verdict == nil {
				t.Fatalf("%d findings, want one judged finding", len(findings))
			}
			f := findings[0]
			if !strings.HasPrefix(f.ClaimSource, "accountant: dp-fedavg") {
				t.Fatalf("claim source %q", f.ClaimSource)
			}
			claim := f.Verdict.Checks[0].Claimed
			if claim < c.claimLo || claim > c.claimHi {
				t.Fatalf("claimed epsilon %g outside [%g, %g]", claim, c.claimLo, c.claimHi)
			}
			t.Logf("claim %g, certified %g", claim, f.Verdict.Checks[0].Lower)
			if f.Verdict.Status != c.want {
				t.Fatalf("verdict %s (epsilon lower %g, claim %g), want %s", f.Verdict.Status, f.Verdict.Checks[0].Lower, claim, c.want)
			}
		})
	}
}

func TestClaimForNeedsRemoveClient(t *testing.T) {
	raw := strings.Replace(dpFedAvgYAML, "kind: remove-client", "kind: replace-client, canary: dirac", 1)
	cfg, err := spec.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ClaimFor(context.Background(), cfg, data, 1e-5); err == nil || !strings.Contains(err.Error(), "adjacency.kind") {
		t.Fatalf("replace-client claim: error %v, want one naming adjacency.kind", err)
	}
	if len(data.Pair.CPrime) != 10 || slices.Equal(data.Pair.CPrime[0].Features, data.Pair.C[0].Features) {
		t.Fatal("replace-client with a dirac canary did not replace client 0")
	}
	bad := strings.Replace(dpFedAvgYAML, "audit:\n", "audit:\n  claim_sampling_rate: 2\n", 1)
	if _, err := spec.Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), "audit.claim_sampling_rate") {
		t.Fatalf("claim_sampling_rate 2: error %v", err)
	}
}

// Staircase noise on DP-FedAvg gets an accountant claim when every round's clip norm is within
// the staircase's design sensitivity (d coordinates, each at most the full design shift); the
// audit of the deployment is then consistent with it. A clip above the design sensitivity has
// no accountant and must say so.
func TestStaircaseClaim(t *testing.T) {
	raw := strings.Replace(dpFedAvgYAML, "  informed: true\n", "  informed: true\n  mechanism: staircase\n  staircase_epsilon: 1\n", 1)
	raw = strings.Replace(raw, "pairs: 1000", "pairs: 300", 1)
	cfg, err := spec.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	findings, err := runFindings(cfg, t.TempDir(), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(findings) != 1 || findings[0].Verdict == nil {
		t.Fatalf("%d findings, want one judged finding", len(findings))
	}
	f := findings[0]
	if !strings.Contains(f.ClaimSource, "Staircase RDP") {
		t.Fatalf("claim source %q", f.ClaimSource)
	}
	t.Logf("claim %g, certified %g", f.Verdict.Checks[0].Claimed, f.Verdict.Checks[0].Lower)
	if f.Verdict.Status != audit.Consistent {
		t.Fatalf("verdict %s: a claim from a valid accountant was violated", f.Verdict.Status)
	}

	tight := strings.Replace(raw, "noise_multiplier: 1.5", "noise_multiplier: 0.5", 1)
	cfg, err = spec.Parse([]byte(tight))
	if err != nil {
		t.Fatal(err)
	}
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ClaimFor(context.Background(), cfg, data, 1e-5); err == nil || !strings.Contains(err.Error(), "design sensitivity") {
		t.Fatalf("clip above the design sensitivity: err = %v", err)
	}
}

// A stated claim about a deployment that averages fewer clients than it has is qualified: the
// informed rows know the participation. No note without a claim, for the DP-FedAvg family
// (whose adversary does not know it), without informed statistics, or with every client.
func TestParticipationNote(t *testing.T) {
	base := spec.Demo()
	base.Train.Informed, base.Train.Participants = true, 2
	base.Data.Clients = 4
	claim := audit.Claim{Mu: 1}
	cases := []struct {
		name string
		edit func(*spec.Config, *audit.Claim)
		want bool
	}{
		{"claim, 2 of 4 clients", func(*spec.Config, *audit.Claim) {}, true},
		{"no claim", func(_ *spec.Config, c *audit.Claim) { *c = audit.Claim{} }, false},
		{"every client", func(c *spec.Config, _ *audit.Claim) { c.Train.Participants = 0 }, false},
		{"not informed", func(c *spec.Config, _ *audit.Claim) { c.Train.Informed = false }, false},
		{"dp-fedavg", func(c *spec.Config, _ *audit.Claim) { c.Train.Algorithm = algo.DPFedAvg }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, cl := *base, claim
			tc.edit(&cfg, &cl)
			note := participationNote(&cfg, cl)
			if got := note != ""; got != tc.want {
				t.Errorf("note %q, want one: %v", note, tc.want)
			}
			if tc.want && !strings.Contains(note, "2 of the 4 clients") {
				t.Errorf("note %q does not name the participation", note)
			}
		})
	}
}

// TestDPFedAvgHeuristic: a DP-FedAvg deployment's final-model rows carry the last-iterate
// heuristic's epsilon at the analysis's delta (claims.LastIterate at that checkpoint, with the
// trained sampling rate even when the accountant is told another), the all-iterates rows do
// not, and findings.json keeps it.
func TestDPFedAvgHeuristic(t *testing.T) {
	raw := strings.Replace(dpFedAvgYAML, "pairs: 1000", "pairs: 60", 1)
	raw = strings.Replace(raw, "checkpoints: [10]", "checkpoints: [0, 4, 10]\n  record_params: true", 1)
	raw = strings.Replace(raw, "attacks: [informed-all]", "attacks: [informed-all, param-cosine]\n  claim_sampling_rate: 0.02", 1)
	cfg, err := spec.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fs, err := runFindings(cfg, dir, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want, err := claims.LastIterate(context.Background(), claimsDeployment(cfg, data), 1e-5, []int{4, 10})
	if err != nil || len(want) != 2 {
		t.Fatalf("heuristic %v, %v", want, err)
	}
	seen := 0
	for _, f := range fs {
		switch f.Threat {
		case runs.ThreatFinal:
			if f.Round == 0 {
				continue
			}
			w := want[0]
			if f.Round == 10 {
				w = want[1]
			}
			if f.EpsHeuristic != w {
				t.Errorf("%s T=%d: eps heuristic %g, want %g", f.Attack, f.Round, f.EpsHeuristic, w)
			}
			seen++
			raw, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			var back findings.Finding
			if err := json.Unmarshal(raw, &back); err != nil || back.EpsHeuristic != f.EpsHeuristic {
				t.Errorf("findings.json: eps heuristic %g after a round trip of %g (%v)", back.EpsHeuristic, f.EpsHeuristic, err)
			}
		default:
			if f.EpsHeuristic != 0 {
				t.Errorf("%s row %s T=%d has eps heuristic %g", f.Threat, f.Attack, f.Round, f.EpsHeuristic)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("%d final-model rows, want 2", seen)
	}
	t.Logf("heuristic eps at T = 4, 10: %.4g, %.4g", want[0], want[1])
}

// Under idp-fedavg the target (client 7, in the group of epsilon 6) and client 0 (epsilon 2)
// run at different clips: the final-model rows of coupled pairs carry the target's heuristic,
// the one-run rows, whose direction canaries train as client 0, client 0's.
func TestHeuristicOfOneRunRowsIsClient0s(t *testing.T) {
	raw := strings.Replace(dpFedAvgYAML, "adjacency: {kind: remove-client, client: 0, index: 0}", "adjacency: {kind: remove-client, client: 7, index: 0}", 1)
	raw = strings.Replace(raw, "  algorithm: dp-fedavg", "  algorithm: idp-fedavg", 1)
	raw = strings.Replace(raw, "  noise_multiplier: 1.5\n", "  privacy:\n    delta: 1.0e-5\n    groups:\n      - {clients: 5, epsilon: 2}\n      - {clients: 5, epsilon: 6}\n", 1)
	cfg, err := spec.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := epsHeuristic(context.Background(), cfg, data, 1e-5, []int32{0, 4, 10})
	if err != nil || h == nil {
		t.Fatalf("no heuristic (%v)", err)
	}
	for _, c := range []struct {
		client int
		oneRun bool
	}{{7, false}, {0, true}} {
		d := claimsDeployment(cfg, data)
		d.Target = c.client
		want, err := claims.LastIterate(context.Background(), d, 1e-5, []int{4, 10})
		if err != nil {
			t.Fatal(err)
		}
		for i, T := range []int{4, 10} {
			if got := h(T, c.oneRun); got != want[i] {
				t.Errorf("one-run %v, T=%d: %g, want client %d's %g", c.oneRun, T, got, c.client, want[i])
			}
		}
	}
	if a, b := h(10, false), h(10, true); a == b {
		t.Errorf("the target's and client 0's heuristics are both %g: the fixture does not tell them apart", a)
	}
}

// dpFedAvgVariant parses dpFedAvgYAML with each (old, new) pair of replacements applied; each
// old text must occur.
func dpFedAvgVariant(t *testing.T, oldNew ...string) *spec.Config {
	t.Helper()
	for i := 0; i < len(oldNew); i += 2 {
		if !strings.Contains(dpFedAvgYAML, oldNew[i]) {
			t.Fatalf("%q not in dpFedAvgYAML", oldNew[i])
		}
	}
	cfg, err := spec.Parse([]byte(strings.NewReplacer(oldNew...).Replace(dpFedAvgYAML)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestRemoveClientLossAttacksSee: under remove-client, C' has no epsilon', and the trainer
// evaluates the absent client's samples on C's data in both worlds, so the *_cprime statistics
// repeat epsilon's. The loss, margin and LiRA attacks took them as epsilon' and scored
// loss(epsilon') - loss(epsilon) = 0 in every run: rows of AUC 1/2 that could never certify
// anything, while -loss(epsilon) alone separates the worlds. They now read epsilon' as absent.
func TestRemoveClientLossAttacksSee(t *testing.T) {
	cfg := dpFedAvgVariant(t,
		"pairs: 1000", "pairs: 400",
		"model: {kind: quadratic, curvature: 1}", "model: {kind: softmax}",
		"noise_multiplier: 1.5", "noise_multiplier: 0.6",
		"rounds: 10", "rounds: 2",
		"checkpoints: [10]", "checkpoints: [2]",
		"attacks: [informed-all]", "attacks: [loss, margin, lira-online]")
	fs, err := runFindings(cfg, t.TempDir(), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 3 {
		t.Fatalf("%d findings, want loss, margin and lira-online", len(fs))
	}
	for _, f := range fs {
		t.Logf("%s: AUC %.3f, mu lower %.3f", f.Attack, f.Result.AUC, f.Result.MuLower)
		if f.Result.AUC < 0.55 {
			t.Errorf("%s: AUC %.3f: the attack does not see the removed client", f.Attack, f.Result.AUC)
		}
	}
}

// TestAccountantEpsilonZeroNoted: at a large delta a heavily noised deployment is (0, delta)-DP
// by its accountant; epsilon 0 reads as no claim, and the rows went unjudged without a word.
// The headline now says why there is no verdict.
func TestAccountantEpsilonZeroNoted(t *testing.T) {
	cfg := dpFedAvgVariant(t,
		"pairs: 1000", "pairs: 50",
		"sampling_rate: 0.5", "sampling_rate: 0.01",
		"noise_multiplier: 1.5", "noise_multiplier: 10",
		"rounds: 10", "rounds: 1",
		"checkpoints: [10]", "checkpoints: [1]",
		"audit:\n", "audit:\n  delta: 0.01\n")
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	claim, source, err := ClaimFor(context.Background(), cfg, data, 0.01)
	if err != nil || claim.Epsilon != 0 || source == "" {
		t.Fatalf("accountant: claim %+v from %q, err %v; want epsilon 0 at delta 0.01", claim, source, err)
	}
	a, err := Run(context.Background(), cfg, t.TempDir(), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(a.Headline.Notes, func(n string) bool { return strings.Contains(n, "gives epsilon = 0 at delta = 0.01") }) {
		t.Errorf("headline notes %q lack the accountant's epsilon of 0", a.Headline.Notes)
	}
}
