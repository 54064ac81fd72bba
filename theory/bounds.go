package theory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/audit"
)

// DefaultDelta is the delta at which Bounds reports epsilon when Config.Delta is zero.
const DefaultDelta = 1e-5

// Config is what the theory needs to know of a training configuration.
type Config struct {
	// Algo is the training algorithm whose privacy the bound describes: algo.FedAvg,
	// algo.FedProx or algo.DPSGD (the m = n = 1 case of Noisy-FedAvg, Remark 3.2).
	Algo algo.Algorithm
	// Schedule gives eta_{k,t}. When nil, it is ParseSchedule(ScheduleName, Eta, K), with
	// ScheduleName "constant" when empty.
	Schedule     Schedule
	ScheduleName string
	Eta          float64 // base learning rate of a named schedule
	L            float64 // smoothness constant of the local losses
	K            int     // local steps per round
	M            int     // clients
	N            int     // clients taking part in a round; 0 means all M
	Sigma        float64 // std of the Gaussian noise each client adds to its upload
	Clip         float64 // clipping norm V of per-step gradients
	Alpha        float64 // FedProx proximal coefficient; must exceed L
	// ProxConstant uses the paper's round-independent constants rho = alpha/(alpha-L),
	// gamma = 2V/(n alpha) for FedProx (Theorem 4) instead of the exact per-round values of
	// Lemmas 9-10 for the schedule.
	ProxConstant bool
	// Delta is the delta at which Bounds converts mu to epsilon; 0 means DefaultDelta.
	Delta float64
	// Batch is, for DP-SGD, the most examples one local step sums over (B); L is then the
	// smoothness of that sum. One replaced example moves a step's summed clipped gradient by
	// at most 2V, but only while both worlds' iterates agree: from the second local step of a
	// round on, the other B - 1 examples' clipped gradients differ too, each by at most
	// min(2V, L/B d_k) at a distance d_k between the iterates (clipping is 1-Lipschitz). So
	// gamma_t of DP-SGD with K >= 2 follows d_{k+1} = d_k + eta_k (min(2(B-1)V, (B-1)/B L d_k)
	// + 2V) from d_0 = 0, and Batch is required there; with K = 1 it is 2V eta.
	Batch int
	// SmoothnessUnknown says that L is a placeholder: the bounds that need L (the convergent
	// bound, rho_t) are to be discarded, and gamma_t must not depend on it. DP-SGD's gamma_t
	// with K >= 2 then takes the other examples' clipped gradients at their largest
	// difference, 2V each.
	SmoothnessUnknown bool
}

// FieldError is a configuration mistake in one field of Config; Field is the field's name.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return "config: " + e.Field + ": " + e.Reason }

func fieldErrorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

func positiveFinite(x float64) bool { return x > 0 && !math.IsInf(x, 1) }

// Validate reports the first mistake in c, as a *FieldError naming the field.
//
// DP-SGD is the case m = n = 1: M and N must then be 1 or 0 (unset); any other value is an
// error rather than silently overridden, since it would mean the caller meant a different
// configuration. For FedProx, every rate of the schedule must satisfy the paper's
// eta < 1/(alpha-L) (Theorem 4) and also eta <= 1/alpha, which the proofs of Lemmas 9-10 use
// without stating it (they bound |1 - eta alpha| by 1 - eta alpha). For a named schedule the
// largest rate is the base rate; a table is checked in full; another Schedule is checked by
// Bounds as it reaches each step.
func (c Config) Validate() error {
	_, err := c.resolve()
	return err
}

// resolve validates c and returns its schedule.
func (c Config) resolve() (Schedule, error) {
	switch c.Algo {
	case algo.FedAvg, algo.FedProx, algo.DPSGD:
	default:
		return nil, fieldErrorf("Algo", "unknown algorithm %q (want %s, %s or %s)", c.Algo, algo.FedAvg, algo.FedProx, algo.DPSGD)
	}
	if c.K < 1 {
		return nil, fieldErrorf("K", "local steps per round must be >= 1, got %d", c.K)
	}
	if c.Algo == algo.DPSGD {
		if c.M != 0 && c.M != 1 {
			return nil, fieldErrorf("M", "dpsgd is the m = n = 1 case of Noisy-FedAvg; M must be 1 or unset, got %d", c.M)
		}
		if c.N != 0 && c.N != 1 {
			return nil, fieldErrorf("N", "dpsgd is the m = n = 1 case of Noisy-FedAvg; N must be 1 or unset, got %d", c.N)
		}
		if c.K >= 2 && c.Batch < 1 {
			return nil, fieldErrorf("Batch", "dpsgd with %d local steps a round needs the largest batch B (the other examples' clipped gradients differ between the worlds from the second step on), got %d", c.K, c.Batch)
		}
	} else {
		if c.M < 1 {
			return nil, fieldErrorf("M", "number of clients must be >= 1, got %d", c.M)
		}
		if c.N < 0 || c.N > c.M {
			return nil, fieldErrorf("N", "participating clients per round must be in [1, M=%d] (0 for all), got %d", c.M, c.N)
		}
	}
	if !positiveFinite(c.Sigma) {
		return nil, fieldErrorf("Sigma", "noise std must be positive and finite, got %v", c.Sigma)
	}
	if !positiveFinite(c.Clip) {
		return nil, fieldErrorf("Clip", "clipping norm V must be positive and finite, got %v", c.Clip)
	}
	if !positiveFinite(c.L) {
		return nil, fieldErrorf("L", "smoothness constant must be positive and finite, got %v", c.L)
	}
	if c.Delta != 0 && !(c.Delta > 0 && c.Delta < 1) {
		return nil, fieldErrorf("Delta", "must be in (0, 1) (or 0 for %g), got %v", DefaultDelta, c.Delta)
	}
	if c.ProxConstant && c.Algo != algo.FedProx {
		return nil, fieldErrorf("ProxConstant", "applies to %s only, not %s", algo.FedProx, c.Algo)
	}
	sched := c.Schedule
	if sched == nil {
		if !positiveFinite(c.Eta) {
			return nil, fieldErrorf("Eta", "learning rate must be positive and finite, got %v", c.Eta)
		}
		name := c.ScheduleName
		if name == "" {
			name = "constant"
		}
		s, err := ParseSchedule(name, c.Eta, c.K)
		if err != nil {
			return nil, &FieldError{Field: "ScheduleName", Reason: err.Error()}
		}
		sched = s
	}
	var table *TableSchedule
	if ts, ok := sched.(*TableSchedule); ok {
		table = ts
		// Exactly K: a table of more steps was read to its first K silently, a bound of the
		// steps the deployment does not take (a third too small with 3 steps and K = 2).
		if _, steps := ts.Size(); steps != c.K {
			return nil, fieldErrorf("Schedule", "table has %d steps per round, K is %d; give K as the table's steps", steps, c.K)
		}
	}
	if c.Algo == algo.FedProx {
		if !(c.Alpha > c.L) || math.IsInf(c.Alpha, 1) {
			return nil, fieldErrorf("Alpha", "FedProx needs a finite proximal coefficient alpha > L = %v (Theorem 4), got %v", c.L, c.Alpha)
		}
		rounds := 1 // decaying named schedules take their largest rates in round 0
		if table != nil {
			rounds, _ = table.Size()
		}
		for t := 0; t < rounds; t++ {
			for k := 0; k < c.K; k++ {
				if err := c.checkProxStep(sched.Eta(k, t), k, t); err != nil {
					return nil, err
				}
			}
		}
	}
	return sched, nil
}

// checkProxStep checks one FedProx rate against the conditions of Lemmas 9-10.
func (c Config) checkProxStep(eta float64, k, t int) error {
	if eta*(c.Alpha-c.L) >= 1 {
		return fieldErrorf("Eta", "FedProx needs eta < 1/(alpha-L) = %v (Theorem 4); eta is %v at step %d of round %d", 1/(c.Alpha-c.L), eta, k, t)
	}
	if eta*c.Alpha > 1 {
		return fieldErrorf("Eta", "FedProx needs eta <= 1/alpha = %v (Lemmas 9-10 assume 1 - eta alpha >= 0); eta is %v at step %d of round %d", 1/c.Alpha, eta, k, t)
	}
	return nil
}

// EffectiveClients is the n that replaces m in the bound: 1 for DP-SGD, N under partial
// participation, else M (Remark 3.2). The server averages n uploads, so both the sensitivity
// 2V/n and the noise std sigma/sqrt(n) of the average use it.
func (c Config) EffectiveClients() int {
	switch {
	case c.Algo == algo.DPSGD:
		return 1
	case c.N > 0:
		return c.N
	}
	return c.M
}

// Bound is the theory for one number of rounds T.
type Bound struct {
	T int
	// Mu is the convergent bound: w_T alone is Mu-GDP, Mu = sqrt(n H_0)/sigma with H_0 from the
	// exact per-round coefficients.
	Mu float64
	// MuClosedForm is the paper's closed form for this configuration, NaN where it gives none
	// (cyclic and iterative schedules, FedProx with exact coefficients).
	MuClosedForm float64
	// ClosedFormKind is "exact" where the closed form equals Mu, "upper" where it can only be
	// larger, and "" where there is none.
	ClosedFormKind string
	// MuComposition is the bound for an observer of every iterate w_1..w_T:
	// sqrt(n)/sigma sqrt(sum_t gamma_t^2).
	MuComposition float64
	// Epsilon and EpsilonComposition are Mu and MuComposition as (epsilon, Delta)-DP.
	Epsilon, EpsilonComposition float64
	Delta                       float64
	// UploadSensitivity is Gamma, the most the target client's upload of round T (the one that
	// makes w_T) can differ between the adjacent datasets when both worlds start the round from
	// the same model: its K local steps of clipped gradients, n gamma_{T-1} (2V sum_k eta_k for
	// FedAvg and DP-SGD).
	UploadSensitivity float64
	// MuUploads is the bound for the uploads observer at T, who sees the model w_{T-1} the round
	// starts from and the target client's noisy upload of that round (noise std sigma, not the
	// average's sigma/sqrt(n)). w_{T-1} is Mu(T-1)-GDP and, given it, the upload is a Gaussian
	// mechanism of sensitivity Gamma and noise sigma, so by adaptive composition
	// MuUploads = sqrt(Mu(T-1)^2 + (Gamma/sigma)^2), with Mu(0) = 0 (w_0 is public).
	MuUploads float64
	// MuUploadsComposition is the same with the composition bound for an observer who has also
	// seen every earlier iterate: sqrt(MuComposition(T-1)^2 + (Gamma/sigma)^2). It does not
	// depend on L.
	MuUploadsComposition float64
	// EpsilonUploads is MuUploads as (epsilon, Delta)-DP.
	EpsilonUploads float64
	// MuCompositionAnyL and MuUploadsCompositionAnyL are MuComposition and
	// MuUploadsComposition as they hold whatever L, where those used an L that is not certified
	// (DP-SGD with K >= 2 bounds the other examples' drift by L); 0 where they need none. The
	// experiment sets them (experiment/bounds.TheoryAt) and judges by them; they are not
	// written with the findings.
	MuCompositionAnyL, MuUploadsCompositionAnyL float64 `json:"-"`
	// MuHeuristic is the last-iterate heuristic of Steinke et al. (ICLR 2025): the exact mu of
	// w_T alone if every local loss were linear, sqrt(n)/sigma (sum_t gamma_t)/sqrt(T). Linear
	// losses make a round w -> w + c with the target's shift at most gamma_t, so w_T is a
	// Gaussian with shift sum_t gamma_t and noise std sqrt(T) sigma/sqrt(n). It equals the
	// convergent bound at L = 0 and, by Cauchy-Schwarz, is at most MuComposition, with
	// equality exactly when gamma_t does not depend on t (constant and cyclic schedules). A
	// heuristic, not a bound: losses with negative curvature can leak more
	// (docs/theory-implementation.md, "The last-iterate heuristic").
	MuHeuristic float64
	// EpsilonHeuristic is MuHeuristic as (epsilon, Delta)-DP.
	EpsilonHeuristic float64
}

// Bounds is BoundsContext without cancellation.
func Bounds(cfg Config, rounds []int) ([]Bound, error) {
	return BoundsContext(context.Background(), cfg, rounds)
}

// BoundsContext computes the bound at every T in rounds (in that order; repeats allowed) in
// one pass over t < max(rounds), O(max T * K) time and O(1) memory beyond the answer.
//
// H_0(T) = (sum_t c_t gamma_t)^2 / sum_t c_t^2 with c_t = prod_{j=t+1}^{T-1} rho_j depends on
// T through every c_t, but its numerator and denominator obey A(T+1) = rho_T A(T) + gamma_T and
// B(T+1) = rho_T^2 B(T) + 1, so one pass yields all T. A and B grow like (1+eta L)^{KT} and
// overflow float64 for long runs, so the pass carries A/sqrt(B) and log sqrt(B) instead
// (see ratioAccumulator), which stay finite for any T.
func BoundsContext(ctx context.Context, cfg Config, rounds []int) ([]Bound, error) {
	sched, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if len(rounds) == 0 {
		return nil, errors.New("bounds: no rounds requested")
	}
	maxT := 0
	for _, T := range rounds {
		if T < 1 {
			return nil, fmt.Errorf("bounds: rounds must be >= 1, got %d", T)
		}
		maxT = max(maxT, T)
	}
	if ts, ok := sched.(*TableSchedule); ok {
		if n, _ := ts.Size(); n < maxT {
			return nil, fieldErrorf("Schedule", "table covers %d rounds, bound asked at T=%d", n, maxT)
		}
	}
	delta := cfg.Delta
	if delta == 0 {
		delta = DefaultDelta
	}
	order := make([]int, len(rounds)) // indices of rounds by increasing T
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return rounds[order[i]] < rounds[order[j]] })

	n := float64(cfg.EffectiveClients())
	scale := math.Sqrt(n) / cfg.Sigma
	_, invariant := sched.(interface{ roundInvariant() bool })
	var (
		acc             ratioAccumulator
		sumGamma2       float64
		sumGamma        float64 // for the heuristic: sum_t gamma_t
		logRho, gamma   float64
		out             = make([]Bound, len(rounds))
		next            = 0
		cancelCheckMask = 1<<16 - 1
	)
	for t := 0; t < maxT; t++ {
		if t&cancelCheckMask == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("bounds: %w", err)
			}
		}
		if t == 0 || !invariant {
			if logRho, gamma, err = cfg.roundCoefficients(sched, t); err != nil {
				return nil, err
			}
		}
		// The bounds on w_t (0 for the public w_0), before round t is added: the uploads
		// observer of round t sees w_t and the target's upload.
		prevMu, prevComp := 0.0, scale*math.Sqrt(sumGamma2)
		if acc.started {
			prevMu = scale * math.Abs(acc.ratio)
		}
		upload := n * gamma / cfg.Sigma // Gamma/sigma: one upload, noise sigma
		acc.push(1, logRho, gamma)
		sumGamma2 += gamma * gamma
		sumGamma += gamma
		for next < len(order) && rounds[order[next]] == t+1 {
			T := t + 1
			b := Bound{
				T:                    T,
				Mu:                   scale * math.Abs(acc.ratio),
				MuComposition:        scale * math.Sqrt(sumGamma2),
				Delta:                delta,
				UploadSensitivity:    n * gamma,
				MuUploads:            math.Hypot(prevMu, upload),
				MuUploadsComposition: math.Hypot(prevComp, upload),
				MuHeuristic:          scale * sumGamma / math.Sqrt(float64(T)),
			}
			b.MuClosedForm, b.ClosedFormKind = cfg.closedForm(sched, T)
			b.Epsilon = epsilonOrInf(b.Mu, delta)
			b.EpsilonComposition = epsilonOrInf(b.MuComposition, delta)
			b.EpsilonUploads = epsilonOrInf(b.MuUploads, delta)
			b.EpsilonHeuristic = epsilonOrInf(b.MuHeuristic, delta)
			out[order[next]] = b
			next++
		}
	}
	return out, nil
}

// epsilonOrInf is EpsilonFromGDP where mu and delta are already known to be valid; an
// infinite mu (sigma so small that the ratio overflows) gives +Inf.
func epsilonOrInf(mu, delta float64) float64 {
	eps, err := audit.EpsilonFromGDP(mu, delta)
	if err != nil {
		return math.Inf(1)
	}
	return eps
}

// RoundCoefficients gives rho_t and gamma_t of round t (0-based) for a valid configuration:
// ||phi(w) - phi'(w~)|| <= rho_t ||w - w~|| + gamma_t, with gamma_t the sensitivity of one
// round's average to the changed sample (Lemmas 7-10, with m replaced by
// EffectiveClients). A trainer can check its measured per-round sensitivity against gamma_t.
func (c Config) RoundCoefficients(t int) (rho, gamma float64, err error) {
	sched, err := c.resolve()
	if err != nil {
		return 0, 0, err
	}
	if t < 0 {
		return 0, 0, fmt.Errorf("round coefficients: round must be >= 0, got %d", t)
	}
	logRho, gamma, err := c.roundCoefficients(sched, t)
	return math.Exp(logRho), gamma, err
}

// roundCoefficients gives log rho_t and gamma_t of round t.
func (c Config) roundCoefficients(sched Schedule, t int) (logRho, gamma float64, err error) {
	n := float64(c.EffectiveClients())
	var (
		sumLog, sumEta float64 // FedAvg: log prod (1 + eta L), sum eta
		r, g           = 1.0, 0.0
		d              float64 // DP-SGD: the worlds' distance after each local step, over 2V
	)
	// DP-SGD's other examples: each clipped gradient differs by at most 2V, or by L/B times
	// the distance (Config.Batch).
	others := float64(c.Batch - 1)
	for k := 0; k < c.K; k++ {
		eta := sched.Eta(k, t)
		if !(eta >= 0) || math.IsInf(eta, 1) {
			return 0, 0, fieldErrorf("Schedule", "eta at step %d of round %d is %v; rates must be finite and not negative", k, t, eta)
		}
		switch c.Algo {
		case algo.FedProx:
			if err := c.checkProxStep(eta, k, t); err != nil {
				return 0, 0, err
			}
			// Unrolled Lemma 10: d_{k+1} <= (1 - eta(alpha-L)) d_k + eta alpha d_0, d_0 = 1.
			r = (1-eta*(c.Alpha-c.L))*r + eta*c.Alpha
			// Unrolled Lemma 9: e_{k+1} <= (1 - eta alpha) e_k + eta (times 2V for the client).
			g = (1-eta*c.Alpha)*g + eta
		default:
			// Lemma 8 telescoped: 1 + L eta(K,t) = prod_k (1 + eta_k L).
			sumLog += math.Log1p(eta * c.L)
			sumEta += eta
			if c.Algo == algo.DPSGD && k > 0 {
				// In units of 2V: min(2(B-1)V, (B-1)/B L 2V d) / 2V.
				drift := others
				if !c.SmoothnessUnknown {
					drift = math.Min(drift, others/float64(c.Batch)*c.L*d)
				}
				d += eta * drift
			}
			d += eta
		}
	}
	if c.Algo == algo.DPSGD {
		return sumLog, 2 * c.Clip / n * d, nil
	}
	switch {
	case c.ProxConstant:
		// rho = alpha/(alpha-L), gamma = 2V/(n alpha): the paper's constant bounds, valid
		// once every step passed checkProxStep above.
		return -math.Log1p(-c.L / c.Alpha), 2 * c.Clip / (n * c.Alpha), nil
	case c.Algo == algo.FedProx:
		return math.Log(r), 2 * c.Clip / n * g, nil
	}
	return sumLog, 2 * c.Clip / n * sumEta, nil
}

// closedForm is the paper's closed form at T and whether it is exact or an upper bound.
func (c Config) closedForm(sched Schedule, T int) (float64, string) {
	sqrtN := math.Sqrt(float64(c.EffectiveClients()))
	if c.Algo == algo.FedProx {
		if !c.ProxConstant {
			// With the exact rho_t < alpha/(alpha-L), H_0 can be on either side of Theorem 4
			// (H_0 falls as a constant rho > 1 grows), so the theorem is neither.
			return math.NaN(), ""
		}
		// Theorem 4: 1 - 2/(r^T + 1) = tanh(T log(r)/2), which does not overflow.
		y := -math.Log1p(-c.L / c.Alpha)
		return 2 * c.Clip / (sqrtN * c.Alpha * c.Sigma) *
			math.Sqrt((2*c.Alpha-c.L)/c.L*math.Tanh(float64(T)*y/2)), "exact"
	}
	if c.Algo == algo.DPSGD && c.K >= 2 && c.Batch > 1 {
		// The closed forms take gamma_t = 2V sum_k eta_k, which DP-SGD's other examples
		// exceed from the second local step on (Config.Batch).
		return math.NaN(), ""
	}
	switch s := sched.(type) {
	case ConstantSchedule:
		// Theorem 3a with a = (1+eta L)^K: (a+1)/(a-1) (a^T-1)/(a^T+1) = tanh(T x/2)/tanh(x/2),
		// x = K log(1 + eta L).
		x := float64(c.K) * math.Log1p(s.Base*c.L)
		return 2 * s.Base * c.Clip * float64(c.K) / (sqrtN * c.Sigma) *
			math.Sqrt(math.Tanh(float64(T)*x/2)/math.Tanh(x/2)), "exact"
	case StageSchedule:
		// Theorem 3c. Cauchy-Schwarz gives H_0 <= sum_t gamma_t^2 and sum_{t<T} 1/(t+1)^2 <= 2 - 1/T,
		// so this is never below the exact value (nor below the composition bound).
		return 2 * s.Base * c.Clip * float64(c.K) / (sqrtN * c.Sigma) * math.Sqrt(2-1/float64(T)), "upper"
	}
	return math.NaN(), ""
}

// ratioAccumulator carries r = A/sqrt(B) and h = log sqrt(B) through A' = rho A + gamma,
// B' = rho^2 B + 1 without forming A or B, so that any number of rounds with rho > 1 stays
// finite. With v = log|rho| + h,
//
//	r' = (sign(rho) r + gamma e^{-v}) / sqrt(1 + e^{-2v}),  h' = v + log(1 + e^{-2v})/2,
//
// multiplied through by e^v when v < 0 so that no exponential overflows. The zero value is
// A = B = 0 (no rounds yet): h = -Inf is represented by started = false.
type ratioAccumulator struct {
	ratio   float64 // A/sqrt(B); H_0 = ratio^2
	halfLog float64 // log sqrt(B)
	started bool
}

func (a *ratioAccumulator) push(sign, logAbsRho, gamma float64) {
	if !a.started {
		a.ratio, a.halfLog, a.started = gamma, 0, true // A = gamma, B = 1
		return
	}
	v := logAbsRho + a.halfLog
	if v >= 0 {
		e := math.Exp(-v)
		a.ratio = (sign*a.ratio + gamma*e) / math.Sqrt(1+e*e)
		a.halfLog = v + 0.5*math.Log1p(e*e)
		return
	}
	e := math.Exp(v)
	a.ratio = (sign*a.ratio*e + gamma) / math.Sqrt(1+e*e)
	a.halfLog = 0.5 * math.Log1p(e*e)
}
