package audit

import (
	"fmt"
	"math"
	"slices"
)

// Options configures Analyze. The zero value asks for a 95% Bonferroni bound at delta = 0.
type Options struct {
	// Confidence is the probability with which the certified bounds hold; 0 means 0.95.
	Confidence float64
	// Method chooses thresholds validly; "" means Bonferroni, or DKWBand when Paired or
	// Dependent.
	Method ThresholdMethod
	// Delta is the delta at which EpsLower is computed (0 is pure DP).
	Delta float64
	// Seed drives the split method's random division of the samples.
	Seed uint64
	// SplitFraction is the share of each world's scores the split method uses to choose
	// thresholds; 0 means 0.5.
	SplitFraction float64
	// Paired says that score i of world C and score i of world C' come from one pair of runs
	// that may share randomness (coupled seeds), so the worlds are not independent samples.
	// The split method then keeps pairs together; DKW needs no change; Bonferroni, whose
	// argument conditions on one world's sample, is refused.
	Paired bool
	// Dependent says that the two worlds' samples may be dependent (coupled runs) without the
	// index pairing of Paired, e.g. when some pairs lost one of their runs. Only the bands that
	// bound each world's distribution on its own (DKW, the rank band, both) stay valid: DKWBand
	// is the default, and Bonferroni and split are refused.
	Dependent bool
}

// DefaultConfidence is the confidence of certified bounds when none is given.
const DefaultConfidence = 0.95

func (o Options) withDefaults() (Options, error) {
	if o.Confidence == 0 {
		o.Confidence = DefaultConfidence
	}
	if !(o.Confidence > 0 && o.Confidence < 1) {
		return o, fmt.Errorf("audit: confidence %v outside (0, 1)", o.Confidence)
	}
	if o.Method == "" && (o.Paired || o.Dependent) {
		o.Method = DKWBand
	}
	m, err := ParseThresholdMethod(string(o.Method))
	if err != nil {
		return o, err
	}
	o.Method = m
	if !(o.Delta >= 0 && o.Delta < 1) {
		return o, fmt.Errorf("audit: delta %v outside [0, 1)", o.Delta)
	}
	if o.SplitFraction == 0 {
		o.SplitFraction = 0.5
	}
	if !(o.SplitFraction > 0 && o.SplitFraction < 1) {
		return o, fmt.Errorf("audit: split fraction %v outside (0, 1)", o.SplitFraction)
	}
	return o, nil
}

// Result is the empirical audit of one pair of score samples.
type Result struct {
	N0 int `json:"n0"` // scores of world C
	N1 int `json:"n1"` // scores of world C'

	AUC                  float64 `json:"auc"`
	TPRAt1e3             float64 `json:"tpr_at_fpr_1e-3"`
	TPRAt1e2             float64 `json:"tpr_at_fpr_1e-2"`
	BestBalancedAccuracy float64 `json:"best_balanced_accuracy"`

	// MuLower is a lower bound on the mechanism's Gaussian-DP parameter that holds with
	// probability at least Confidence (0 when the data show nothing).
	MuLower float64 `json:"mu_lower"`
	// EpsLower is a lower bound on eps at Delta, from the same certified tests.
	EpsLower   float64         `json:"eps_lower"`
	Delta      float64         `json:"delta"`
	Confidence float64         `json:"confidence"`
	Method     ThresholdMethod `json:"method"`
	Paired     bool            `json:"paired,omitempty"`
	// Candidates is the number of tests the method bounded (the Bonferroni k).
	Candidates int `json:"candidates"`
	// MuEstimate is a point estimate, not a bound: the mu of the Gaussian pair with the same
	// AUC, sqrt(2) Phi^{-1}(AUC), floored at 0 (with AUC capped at 1 - 1/(2 N0 N1) so that a
	// perfect separation gives a finite number). It estimates the privacy loss this attack
	// sees, assuming its scores look Gaussian; it may exceed the truth.
	MuEstimate float64 `json:"mu_estimate"`

	// MuPoint and EpsPoint are the certified tests that give MuLower and EpsLower.
	MuPoint  CertifiedPoint `json:"mu_point"`
	EpsPoint CertifiedPoint `json:"eps_point"`
	// Certified holds every test the method bounded; all their bounds hold jointly.
	Certified []CertifiedPoint `json:"certified"`
	// Band is the simultaneous band of the DKW method, nil for the others.
	Band *Band `json:"band,omitempty"`
	// OneRun holds the guesses of a one-run audit (OneRunAnalyze), nil for the other methods.
	OneRun *OneRunResult `json:"one_run,omitempty"`
	// Implied are results whose certified bounds hold for this result's mechanism too, on the
	// event that all of them hold (Imply): the observer of every iterate at an earlier checkpoint
	// sees part of what it sees at a later one. MuLower and EpsLower include them; EpsLowerAt
	// takes them into account.
	Implied []*Result `json:"-"`

	ROC *ROC `json:"roc"`
}

// Analyze computes the ROC of the scores of world C against those of world C' and certified
// lower bounds on mu and on eps at opts.Delta. Empty samples, NaN or infinite scores and
// invalid options are errors; the inputs are not modified.
func Analyze(scoresC, scoresCPrime []float64, opts Options) (*Result, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	x, y, err := sortedCopies(scoresC, scoresCPrime)
	if err != nil {
		return nil, err
	}
	if err := opts.checkCoupled(); err != nil {
		return nil, err
	}
	var cert certification
	switch {
	case opts.Paired && opts.Method == Split:
		cert, err = certifySplitPaired(scoresC, scoresCPrime, opts.Confidence, opts.SplitFraction, opts.Delta, opts.Seed)
	default:
		cert, err = certifySorted(x, y, opts, nil)
	}
	if err != nil {
		return nil, err
	}
	roc := rocSorted(x, y)
	res := &Result{
		N0: len(x), N1: len(y),
		AUC: roc.AUC, TPRAt1e3: roc.TPRAt1e3, TPRAt1e2: roc.TPRAt1e2,
		BestBalancedAccuracy: roc.BestBalancedAccuracy,
		Delta:                opts.Delta, Confidence: opts.Confidence, Method: opts.Method,
		Paired:     opts.Paired,
		Candidates: cert.candidates,
		MuEstimate: muFromAUC(roc.AUC, len(x), len(y)),
		Certified:  cert.points,
		Band:       cert.band,
		ROC:        roc,
	}
	res.MuPoint = cert.points[bestMu(cert.points)]
	res.MuLower = math.Max(0, res.MuPoint.Mu())
	res.EpsPoint = cert.points[bestEps(cert.points, opts.Delta)]
	res.EpsLower = res.EpsPoint.Epsilon(opts.Delta)
	return res, nil
}

// EpsLowerAt returns the certified lower bound on eps at delta from the same tests as
// EpsLower; it holds at the same confidence for any delta fixed in advance.
func (r *Result) EpsLowerAt(delta float64) float64 {
	eps := r.ownEpsLowerAt(delta)
	for _, w := range r.Implied {
		eps = math.Max(eps, w.ownEpsLowerAt(delta))
	}
	return eps
}

// ownEpsLowerAt is EpsLowerAt from the result's own tests.
func (r *Result) ownEpsLowerAt(delta float64) float64 {
	if r.OneRun != nil {
		return r.OneRun.EpsLowerAt(delta)
	}
	if len(r.Certified) == 0 {
		return 0
	}
	return r.Certified[bestEps(r.Certified, delta)].Epsilon(delta)
}

// Imply records that the bounds of weaker, certified for a mechanism that this result's
// mechanism post-processes into (for example the observer of every iterate at an earlier
// checkpoint), bound this mechanism too: a test of the weaker view is a test of this one, so
// its privacy loss is at least the weaker one's. MuLower and EpsLower become the larger of the
// two. The statement holds on the event that both results' bounds hold, so it is valid when
// both belong to one family whose bounds hold jointly (Bonferroni over rows), and costs no
// confidence there.
func (r *Result) Imply(weaker *Result) {
	r.Implied = append(r.Implied, weaker)
	r.MuLower = math.Max(r.MuLower, weaker.MuLower)
	r.EpsLower = math.Max(r.EpsLower, weaker.ownEpsLowerAt(r.Delta))
}

// checkCoupled refuses the methods whose argument coupled scores break: Bonferroni conditions on
// one world's sample to make the other's count binomial, and the split method keeps coupled runs
// together only through the index pairing of Paired.
func (o Options) checkCoupled() error {
	switch {
	case (o.Paired || o.Dependent) && o.Method == Bonferroni:
		return fmt.Errorf("audit: the bonferroni method assumes independent worlds; use dkw (or split, for complete pairs) for coupled scores")
	case o.Dependent && !o.Paired && o.Method == Split:
		return fmt.Errorf("audit: the split method needs complete pairs to keep coupled runs together; use dkw")
	}
	return nil
}

// certifySorted runs the chosen method on sorted samples. plan, when non-nil and of the right
// sizes and confidence, is reused by the Bonferroni method.
func certifySorted(x, y []float64, opts Options, plan *BonferroniPlan) (certification, error) {
	switch opts.Method {
	case Bonferroni:
		if !plan.fits(len(x), len(y), opts.Confidence) {
			plan = NewBonferroniPlan(len(x), len(y), opts.Confidence)
		}
		return plan.certify(x, y), nil
	case Split:
		return certifySplit(x, y, opts.Confidence, opts.SplitFraction, opts.Delta, opts.Seed)
	case DKW:
		return certifyDKW(x, y, opts.Confidence), nil
	case RankBand:
		return certifyRankBand(x, y, opts.Confidence), nil
	case DKWBand:
		return certifyDKWBand(x, y, opts.Confidence), nil
	}
	return certification{}, fmt.Errorf("audit: unknown threshold method %q", opts.Method)
}

// MuLowerSorted is the certified lower bound on mu (at least 0) of method opts.Method on
// samples x (world C) and y (world C') already sorted ascending and valid, without the
// checks of the scores, the curve and the epsilon of Analyze: the bound alone, for simulations
// that compute it thousands of times (package audit/calibrate). opts means what it means to
// Analyze (zero fields take their defaults; a Confidence of 0 is 95%, not a bound at level 0),
// and the methods Analyze refuses for coupled scores are refused, as is the paired split, whose
// pairing sorted samples no longer carry. plan, when non-nil and of the sizes of x and y and
// opts.Confidence, is reused by the Bonferroni method; other methods ignore it.
func MuLowerSorted(x, y []float64, opts Options, plan *BonferroniPlan) (float64, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return 0, err
	}
	if err := opts.checkCoupled(); err != nil {
		return 0, err
	}
	if opts.Paired && opts.Method == Split {
		return 0, fmt.Errorf("audit: the paired split needs the scores in pair order; use Analyze")
	}
	switch opts.Method {
	case Bonferroni:
		if !plan.fits(len(x), len(y), opts.Confidence) {
			plan = NewBonferroniPlan(len(x), len(y), opts.Confidence)
		}
		return math.Max(0, plan.muLower(x, y)), nil
	case DKW:
		return math.Max(0, dkwMuLower(x, y, opts.Confidence)), nil
	case RankBand:
		return math.Max(0, rankBandMuLower(x, y, opts.Confidence)), nil
	case DKWBand:
		return math.Max(0, dkwBandMuLower(x, y, opts.Confidence)), nil
	}
	cert, err := certifySorted(x, y, opts, plan)
	if err != nil {
		return 0, err
	}
	return math.Max(0, cert.points[bestMu(cert.points)].Mu()), nil
}

// muFromAUC inverts AUC = Phi(mu/sqrt 2), the AUC of N(mu, 1) against N(0, 1). A perfect AUC
// is taken half a pair of scores below 1, and never at or below 1/2: with one score a world
// the cap of 1 - 0.5/(n0 n1) was 1/2, and a perfect separation estimated mu 0.
func muFromAUC(auc float64, n0, n1 int) float64 {
	auc = math.Min(auc, 1-0.5/max(float64(n0)*float64(n1), 2))
	return math.Max(0, math.Sqrt2*normQuantile(auc))
}

// Median is the middle value of xs (the mean of the two middle ones for an even count), NaN
// for none; xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
