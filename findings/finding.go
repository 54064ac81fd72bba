package findings

import (
	"bytes"
	"encoding/json"
	"math"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/theory"
)

// Claim kinds: what a verdict judged (Finding.ClaimKind).
const (
	// ClaimDeployment is a claim the deployment makes: the user's, or its accountant's.
	ClaimDeployment = "claim"
	// ClaimTheory is a bound of the theory that holds for the configuration as trained
	// (the composition bound; the convergent bound with a proven smoothness constant).
	ClaimTheory = "bound"
	// ClaimEstimate is a theory value computed from an assumed or estimated constant (the
	// convergent bound with a given or estimated L for an MLP): exceeding it says the
	// estimate is too small, not that the deployment broke a promise.
	ClaimEstimate = "estimate"
)

// VerdictExceedsEstimate is the verdict findings.json gives a row whose certified bound is
// above an estimate (ClaimEstimate): not "violated", which a program filtering the rows on the
// verdict alone would take for a broken promise of the deployment (format 2 wrote "violated"
// there, beside the claim_kind).
const VerdictExceedsEstimate = "exceeds estimate"

// Finding is the audit of one attack under one threat model at one checkpoint.
//
// Its JSON form (one row of findings.json) flattens Result, Theory and Verdict into the
// numbers a reader needs; decoding a row gives back a Finding with those numbers, NaN where
// the row has null, and without what the row does not hold (the ROC, the verdict's checks, the
// ids of unpaired scores).
type Finding struct {
	Attack string
	// Threat is the threat model the attack's scores were computed under: "final" (the final
	// model), "all-iterates" (every global model) or "uploads" (the target client's uploads).
	Threat string
	Round  int
	// Result is the empirical side: ROC, AUC, certified lower bounds (at the row confidence of
	// the analysis's family).
	Result *audit.Result
	// Theory is the bound at this round, nil when the scores come without a config.
	Theory *theory.Bound
	// ClaimSource says what the verdict judged: "config claim", "--claim-mu claim",
	// "accountant: ..." (the DP-FedAvg family's accountant), "convergent bound",
	// "convergent bound with estimated L", "composition bound", "uploads bound", "uploads bound
	// with estimated L", "uploads composition bound", or "" when there was nothing
	// to judge. ClaimKind is ClaimDeployment, ClaimTheory or ClaimEstimate ("" means
	// ClaimDeployment).
	ClaimSource string
	ClaimKind   string
	// Verdict judges the claim against Result; nil when nothing was judged.
	Verdict *audit.Verdict
	// ExactMu is the exact mu of the mechanism for this threat model and round where it is known
	// (the quadratic reference instance), NaN elsewhere.
	ExactMu float64
	// Metrics holds the mean of each of the attack's own success metrics (label accuracy,
	// PSNR, ...) over the runs where it is defined; nil when the attack reports none.
	Metrics map[string]float64
	// ReversedMuLower is the mu the scores certify when read the other way round (higher
	// means C'), at the same confidence; NaN unless the AUC is below 1/2. A positive value
	// means the attack is worse than guessing in its stated direction: its scores are most
	// likely reversed, and the verdict says nothing about the claim.
	ReversedMuLower float64
	// ReversedEpsLower is the epsilon read the other way round at the delta of an epsilon
	// claim, for the headline only (headline.Reversed): not written to findings.json. 0 unless
	// ReversedMuLower is set and an epsilon is claimed.
	ReversedEpsLower float64
	// Unpaired lists the pair ids of coupled scores that appear in only one world. JSON keeps
	// only their number: a decoded finding holds that many ids of -1.
	Unpaired []int64
	// Seed is the split method's seed (0 for the other methods).
	Seed uint64
	// Runs is the number of runs a one-run row pooled (Result.Method audit.OneRunMethod: its
	// canaries are those of the world-C runs of every pair); 0 on other rows.
	Runs int
	// Estimate is the one-shot estimate (Andrew et al., 2024) beside a one-run row of direction
	// canaries: an estimate without any confidence statement, never judged. Nil elsewhere.
	Estimate *audit.OneShotEstimate
	// EpsHeuristic is the last-iterate heuristic's epsilon at the row's delta on a final-model
	// row of the DP-FedAvg family (claims.LastIterate: the final model's privacy if the losses
	// were linear, what a final-model attack can be expected to reach at most; a heuristic, not
	// a bound), the counterpart of MuHeuristic where the accountant states epsilon. Zero where
	// unknown.
	EpsHeuristic float64
	// AtT holds the bounds the scores of checkpoint T alone certify, on an all-iterates row whose
	// Result carries a larger bound from an earlier checkpoint of the same attack (the observer
	// of every iterate at T sees all that observer saw); nil otherwise.
	AtT *Bounds
}

// Bounds is a pair of certified lower bounds: mu, and eps at the row's delta.
type Bounds struct {
	MuLower, EpsLower float64
}

// OneRun reports whether the row is a one-run audit of canaries rather than an audit of
// coupled pairs.
func (f *Finding) OneRun() bool { return f.Result != nil && f.Result.Method == audit.OneRunMethod }

// RoundGiven reports whether the row's round is known. Every row fedaudit's attacks score is
// of a round T >= 1 (w_0, the model before training, is the same in both worlds); round 0 is
// what a score file or an outputs table without a round column gives its rows. Such a row is
// named "T unknown" (headline) and its T shown as "-" (tables) rather than "T = 0", which reads
// as before training; its JSON keeps round 0.
func (f *Finding) RoundGiven() bool { return f.Round > 0 }

// EpsilonCheck is the check of the row's verdict that compared a claimed epsilon (its Lower is
// the certified epsilon at the claim's delta), if any.
func (f *Finding) EpsilonCheck() (audit.Check, bool) {
	if f.Verdict != nil {
		for _, c := range f.Verdict.Checks {
			if c.Quantity == "epsilon" {
				return c, true
			}
		}
	}
	return audit.Check{}, false
}

// Reversed reports whether the attack's scores certify privacy loss only when read in the
// opposite direction.
func (f *Finding) Reversed() bool { return f.ReversedMuLower > 0 }

// MuUploads is the theory's bound for the uploads observer shown on an uploads row: the
// convergent one, else the composition one (which needs no L but for DP-SGD with K >= 2);
// NaN on other rows or without theory.
func (f *Finding) MuUploads() float64 {
	if f.Theory == nil || f.Threat != runs.ThreatUploads {
		return math.NaN()
	}
	if finite(f.Theory.MuUploads) != nil {
		return f.Theory.MuUploads
	}
	return f.Theory.MuUploadsComposition
}

// MuHeuristic is a final-model row's last-iterate heuristic (theory.Bound.MuHeuristic: the final
// model's exact mu if the losses were linear, what a final-model attack can be expected to reach
// at most; a heuristic, not a bound); NaN on other rows or without theory.
func (f *Finding) MuHeuristic() float64 {
	if f.Theory == nil || f.Threat != runs.ThreatFinal {
		return math.NaN()
	}
	return f.Theory.MuHeuristic
}

// record is the JSON form of a Finding: one object per (attack, threat, round). Fields without
// a value (no theory, no claim) are null.
type record struct {
	Attack      string  `json:"attack"`
	Threat      string  `json:"threat"`
	Round       int     `json:"round"`
	N0          int     `json:"n0"`
	N1          int     `json:"n1"`
	AUC         float64 `json:"auc"`
	TPRAt1e3    float64 `json:"tpr_at_fpr_0.001"`
	TPRAt1e2    float64 `json:"tpr_at_fpr_0.01"`
	BalancedAcc float64 `json:"best_balanced_accuracy"`
	MuLower     float64 `json:"mu_lower"`
	EpsLower    float64 `json:"eps_lower"`
	MuEstimate  float64 `json:"mu_estimate"`
	Delta       float64 `json:"delta"`
	// Confidence is the row's own level; the family's statement is in the analysis's family.
	Confidence float64 `json:"confidence"`
	Method     string  `json:"method"`
	Paired     bool    `json:"paired"`
	Unpaired   int     `json:"unpaired,omitempty"`
	// Seed is the split method's seed (absent for the other methods).
	Seed          *uint64  `json:"split_seed,omitempty"`
	MuExact       *float64 `json:"mu_exact"`
	MuConvergent  *float64 `json:"mu_convergent"`
	MuComposition *float64 `json:"mu_composition"`
	// MuUploads is set on uploads rows only.
	MuUploads *float64 `json:"mu_uploads,omitempty"`
	// MuHeuristic, the last-iterate heuristic (theory.Bound.MuHeuristic), is set on final-model
	// rows only: what a final-model attack can be expected to reach at most.
	MuHeuristic *float64 `json:"mu_heuristic,omitempty"`
	// EpsHeuristic (Finding.EpsHeuristic) is set on final-model rows of the DP-FedAvg family.
	EpsHeuristic *float64 `json:"eps_heuristic,omitempty"`
	Verdict      *string  `json:"verdict"`
	ClaimSource  *string  `json:"claim_source"`
	ClaimKind    *string  `json:"claim_kind"`
	Tightness    *float64 `json:"tightness"`
	// ReversedMuLower is set only when positive.
	ReversedMuLower *float64           `json:"reversed_mu_lower,omitempty"`
	Metrics         map[string]float64 `json:"metrics,omitempty"`
	// MuLowerAtT and EpsLowerAtT are set on all-iterates rows whose mu_lower and eps_lower were
	// carried from an earlier checkpoint: the bounds of checkpoint T's scores alone.
	MuLowerAtT  *float64 `json:"mu_lower_at_t,omitempty"`
	EpsLowerAtT *float64 `json:"eps_lower_at_t,omitempty"`
	// OneRun is set on one-run rows, Estimate on the one-run rows that have a one-shot estimate.
	OneRun   *oneRunRecord   `json:"one_run,omitempty"`
	Estimate *estimateRecord `json:"estimate,omitempty"`
}

// oneRunRecord is what a one-run row adds: the runs pooled, the canaries and the guesses of the
// tests that gave mu_lower and eps_lower. On these rows n0 and n1 count the included and the
// excluded canaries.
type oneRunRecord struct {
	Runs       int     `json:"runs"`
	Canaries   int     `json:"canaries"`
	MuGuesses  int     `json:"mu_guesses"`
	MuCorrect  int     `json:"mu_correct"`
	EpsGuesses int     `json:"eps_guesses"`
	EpsCorrect int     `json:"eps_correct"`
	EpsDelta   float64 `json:"eps_delta"`
}

// estimateRecord is a one-shot estimate: "certified" is always false, so that a reader of the
// file alone cannot take it for a bound.
type estimateRecord struct {
	Method    string   `json:"method"`
	Certified bool     `json:"certified"`
	Epsilon   *float64 `json:"epsilon"`
	Delta     float64  `json:"delta"`
	Mu        *float64 `json:"mu"`
}

// EstimateMethod names the one-shot estimate in findings.json.
const EstimateMethod = "one-shot (Andrew et al. 2024), Gaussian fit; an estimate, not a bound"

// finite points to x, or is nil when x has no JSON number (NaN, infinite).
func finite(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// orNaN is the value p points to, NaN for nil (a null in JSON).
func orNaN(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

func (f *Finding) record() record {
	r := f.Result
	if r == nil {
		r = &audit.Result{}
	}
	rec := record{
		Attack: f.Attack, Threat: f.Threat, Round: f.Round, N0: r.N0, N1: r.N1,
		AUC: r.AUC, TPRAt1e3: r.TPRAt1e3, TPRAt1e2: r.TPRAt1e2, BalancedAcc: r.BestBalancedAccuracy,
		MuLower: r.MuLower, EpsLower: r.EpsLower, MuEstimate: r.MuEstimate,
		Delta: r.Delta, Confidence: r.Confidence, Method: string(r.Method), Paired: r.Paired,
		Unpaired: len(f.Unpaired),
		Metrics:  f.Metrics,
	}
	if r.Method == audit.Split {
		seed := f.Seed
		rec.Seed = &seed
	}
	rec.MuExact = finite(f.ExactMu)
	if f.Theory != nil {
		rec.MuConvergent = finite(f.Theory.Mu)
		rec.MuComposition = finite(f.Theory.MuComposition)
		rec.MuUploads = finite(f.MuUploads())
		rec.MuHeuristic = finite(f.MuHeuristic())
	}
	if f.EpsHeuristic > 0 {
		rec.EpsHeuristic = finite(f.EpsHeuristic)
	}
	if f.Verdict != nil {
		s, src, kind := string(f.Verdict.Status), f.ClaimSource, f.ClaimKind
		if kind == ClaimEstimate && f.Verdict.Status == audit.Violated {
			s = VerdictExceedsEstimate
		}
		rec.Verdict, rec.ClaimSource, rec.ClaimKind = &s, &src, &kind
		rec.Tightness = finite(f.Verdict.Tightness)
	}
	if f.Reversed() {
		rec.ReversedMuLower = finite(f.ReversedMuLower)
	}
	if f.AtT != nil {
		rec.MuLowerAtT, rec.EpsLowerAtT = finite(f.AtT.MuLower), finite(f.AtT.EpsLower)
	}
	if or := r.OneRun; or != nil {
		rec.OneRun = &oneRunRecord{Runs: f.Runs, Canaries: or.Canaries, EpsDelta: or.Delta}
		for _, c := range or.Candidates {
			if c.OneRunChoice == or.MuChoice && c.Mu == or.MuLower {
				rec.OneRun.MuGuesses, rec.OneRun.MuCorrect = c.Guesses, c.Correct
			}
			if c.OneRunChoice == or.EpsChoice && c.Eps == or.EpsLower {
				rec.OneRun.EpsGuesses, rec.OneRun.EpsCorrect = c.Guesses, c.Correct
			}
		}
	}
	if e := f.Estimate; e != nil {
		rec.Estimate = &estimateRecord{Method: EstimateMethod, Epsilon: finite(e.Epsilon), Delta: e.Delta, Mu: finite(e.Mu)}
	}
	return rec
}

// MarshalJSON writes the finding as one row of findings.json, with NaN as null and with "<",
// ">" and "&" left as they are for people who read the file.
func (f Finding) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(f.record()); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// UnmarshalJSON reads one row of findings.json (of this version or an older one).
func (f *Finding) UnmarshalJSON(raw []byte) error {
	var rec record
	if err := json.Unmarshal(raw, &rec); err != nil {
		return err
	}
	nan := math.NaN()
	*f = Finding{
		Attack: rec.Attack, Threat: rec.Threat, Round: rec.Round,
		Result: &audit.Result{
			N0: rec.N0, N1: rec.N1, AUC: rec.AUC, TPRAt1e3: rec.TPRAt1e3, TPRAt1e2: rec.TPRAt1e2,
			BestBalancedAccuracy: rec.BalancedAcc, MuLower: rec.MuLower, EpsLower: rec.EpsLower,
			MuEstimate: rec.MuEstimate, Delta: rec.Delta, Confidence: rec.Confidence,
			Method: audit.ThresholdMethod(rec.Method), Paired: rec.Paired,
		},
		ExactMu: orNaN(rec.MuExact), Metrics: rec.Metrics, ReversedMuLower: orNaN(rec.ReversedMuLower),
	}
	if rec.MuLowerAtT != nil || rec.EpsLowerAtT != nil {
		f.AtT = &Bounds{MuLower: orNaN(rec.MuLowerAtT), EpsLower: orNaN(rec.EpsLowerAtT)}
	}
	if rec.EpsHeuristic != nil {
		f.EpsHeuristic = *rec.EpsHeuristic
	}
	if rec.Seed != nil {
		f.Seed = *rec.Seed
	}
	if rec.OneRun != nil {
		f.Runs = rec.OneRun.Runs
	}
	if e := rec.Estimate; e != nil {
		f.Estimate = &audit.OneShotEstimate{Epsilon: orNaN(e.Epsilon), Delta: e.Delta, Mu: orNaN(e.Mu)}
	}
	if rec.Unpaired > 0 {
		f.Unpaired = make([]int64, rec.Unpaired)
		for i := range f.Unpaired {
			f.Unpaired[i] = -1
		}
	}
	if rec.MuConvergent != nil || rec.MuComposition != nil || rec.MuUploads != nil || rec.MuHeuristic != nil {
		// Only the bounds the row shows are known; the rest of the theory is NaN.
		f.Theory = &theory.Bound{T: rec.Round, Mu: orNaN(rec.MuConvergent), MuClosedForm: nan,
			MuComposition: orNaN(rec.MuComposition), Epsilon: nan, EpsilonComposition: nan, Delta: rec.Delta,
			UploadSensitivity: nan, MuUploads: orNaN(rec.MuUploads), MuUploadsComposition: nan, EpsilonUploads: nan,
			MuHeuristic: orNaN(rec.MuHeuristic), EpsilonHeuristic: nan}
	}
	if rec.Verdict != nil {
		status := audit.Status(*rec.Verdict)
		if *rec.Verdict == VerdictExceedsEstimate {
			status = audit.Violated // of the estimate the claim_kind names
		}
		f.Verdict = &audit.Verdict{Status: status, Confidence: rec.Confidence, Tightness: orNaN(rec.Tightness)}
		if rec.ClaimSource != nil {
			f.ClaimSource = *rec.ClaimSource
		}
		if rec.ClaimKind != nil {
			f.ClaimKind = *rec.ClaimKind
		}
	}
	return nil
}
