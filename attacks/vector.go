package attacks

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/runs"
)

// Parameter-space distinguishers that need no model: they read a run's parameter vector (or the
// target client's update) as numbers, so they audit models of any architecture, imported ones
// of unknown architecture (model kind external) included. What tells the worlds apart is
// learned on the shadow pairs from their whole vectors, which are too large to reduce to
// features first: the runner fits these attacks while it still holds the parameters (fitVectors).

// vectorOf is what a vector attack reads of an observation.
type vectorOf int

const (
	finalParams  vectorOf = iota // w_T
	finalMove                    // w_T - w_0
	uploadUpdate                 // U_T - w_{T-1}, the target client's update of round T-1
)

// vectorAttack scores the vector v an observation shows with a direction fitted on the shadow
// pairs: diagonal linear discriminant analysis (each coordinate weighted by the worlds' mean
// difference over its pooled variance, the optimal linear test for independent Gaussian
// coordinates) or, with cosine, the cosine between v and the worlds' mean difference d: the
// one-shot statistic of Andrew et al. (2024), whose canary direction is d here, since the
// canary's direction in the parameters of an unknown model is not known in advance.
type vectorAttack struct {
	name, threat, summary string
	of                    vectorOf
	cosine                bool
}

func (a vectorAttack) Info() Info {
	n := Needs{Params: true}
	switch a.of {
	case finalMove:
		n.Initial = true
	case uploadUpdate:
		n.Upload = true
	}
	return Info{Name: a.name, Threat: a.threat, Needs: n, Learned: true, Summary: a.summary}
}

// Observe only says whether the observation shows the vector: fitVectors scores it.
func (a vectorAttack) Observe(_ *Env, obs *Observation) (Observed, error) {
	if a.of == uploadUpdate && runs.UploadAbsent(obs.Row.Upload) {
		return Observed{}, errMissing
	}
	return Observed{}, nil
}

// vector returns the vector observation obs shows.
func (a vectorAttack) vector(env *Env, obs *Observation) ([]float64, error) {
	switch a.of {
	case finalMove:
		w0 := initialParams(env, obs)
		if len(w0) != len(obs.Row.Params) {
			return nil, fmt.Errorf("w_0 has %d parameters, w_%d %d", len(w0), obs.Round, len(obs.Row.Params))
		}
		v := to64(obs.Row.Params)
		for i := range v {
			v[i] -= w0[i]
		}
		return v, nil
	case uploadUpdate:
		return update(obs)
	}
	return to64(obs.Row.Params), nil
}

// vectorFit accumulates the shadow vectors of both worlds: sums and sums of squares per
// coordinate, in observation order (so the fit does not depend on the worker count).
type vectorFit struct {
	n          [2]float64
	sum, sumSq [2][]float64
}

func (f *vectorFit) add(world int8, v []float64) error {
	w := 0
	if world == runs.WorldCPrime {
		w = 1
	}
	if f.sum[0] == nil {
		for k := range 2 {
			f.sum[k], f.sumSq[k] = make([]float64, len(v)), make([]float64, len(v))
		}
	}
	if len(v) != len(f.sum[0]) {
		return fmt.Errorf("vectors of %d and %d values", len(f.sum[0]), len(v))
	}
	f.n[w]++
	for i, x := range v {
		f.sum[w][i] += x
		f.sumSq[w][i] += x * x
	}
	return nil
}

// scorer returns the fitted test: higher means world C.
func (a vectorAttack) scorer(f *vectorFit) (func([]float64) float64, error) {
	if f.n[0] < 2 || f.n[1] < 2 {
		return nil, fmt.Errorf("%w: need at least 2 runs of each world, have %v of C and %v of C'", errFewShadowRuns, f.n[0], f.n[1])
	}
	d := len(f.sum[0])
	diff, mid := make([]float64, d), make([]float64, d)
	for i := range diff {
		mc, mp := f.sum[0][i]/f.n[0], f.sum[1][i]/f.n[1]
		diff[i], mid[i] = mc-mp, (mc+mp)/2
	}
	if a.cosine {
		dn := math.Sqrt(dot(diff, diff))
		return func(v []float64) float64 {
			vn := math.Sqrt(dot(v, v))
			if vn == 0 || dn == 0 {
				return 0
			}
			return dot(v, diff) / (vn * dn)
		}, nil
	}
	// Pooled within-world variance per coordinate, with a ridge of 1e-6 of its mean (a
	// coordinate that never moves, such as a frozen layer, would otherwise divide by zero).
	coef := make([]float64, d)
	var mean float64
	for i := range coef {
		ss := 0.0
		for w := range 2 {
			m := f.sum[w][i] / f.n[w]
			ss += math.Max(f.sumSq[w][i]-f.n[w]*m*m, 0)
		}
		coef[i] = ss / (f.n[0] + f.n[1] - 2)
		mean += coef[i] / float64(d)
	}
	ridge := 1e-6*mean + 1e-300
	for i := range coef {
		coef[i] = diff[i] / (coef[i] + ridge)
	}
	return func(v []float64) float64 {
		var s float64
		for i, x := range v {
			s += coef[i] * (x - mid[i])
		}
		return s
	}, nil
}

// fitVectors fits every vector attack at every round on the shadow pairs' vectors and scores
// the other observations with it, while the parameters are still held.
func (sc *scoring) fitVectors(ctx context.Context, workers int) error {
	type job struct{ ai, round int }
	var jobs []job
	for ai, a := range sc.atts {
		if _, ok := a.(vectorAttack); !ok {
			continue
		}
		sc.learned[ai] = true
		if len(sc.shadow) == 0 {
			return fmt.Errorf("attacks: %s is fitted on shadow pairs (every %d-th pair), and there are only %d pairs", a.Info().Name, shadowEvery(sc.env), len(pairIDs(sc.obs)))
		}
		for _, t := range sc.rounds {
			jobs = append(jobs, job{ai, t})
		}
	}
	return parallel(ctx, workers, len(jobs), func(j int) error {
		ai, t := jobs[j].ai, int32(jobs[j].round)
		a := sc.atts[ai].(vectorAttack)
		var fit vectorFit
		var targets []int
		for oi := range sc.obs {
			o := &sc.obs[oi]
			if o.Round != t || sc.status[ai][oi] != nil {
				continue
			}
			if !sc.shadow[o.PairID] {
				targets = append(targets, oi)
				continue
			}
			v, err := a.vector(sc.env, o)
			if err == nil && !allFinite(v) {
				continue // a diverged shadow run would make every coefficient NaN (see fitOne)
			}
			if err == nil {
				err = fit.add(o.World, v)
			}
			if err != nil {
				return fmt.Errorf("attacks: %s on run %d at round %d: %w", a.name, o.RunID, t, err)
			}
		}
		if len(targets) == 0 {
			return nil
		}
		score, err := a.scorer(&fit)
		if errors.Is(err, errFewShadowRuns) {
			sc.unfitted(ai, t, targets, err)
			return nil
		}
		if err != nil {
			return fmt.Errorf("attacks: %s at round %d: fit on %d shadow pairs: %w", a.name, t, len(sc.shadow), err)
		}
		for _, oi := range targets {
			v, err := a.vector(sc.env, &sc.obs[oi])
			if err != nil {
				return fmt.Errorf("attacks: %s on run %d at round %d: %w", a.name, sc.obs[oi].RunID, t, err)
			}
			sc.observed[ai][oi].Score = score(v)
		}
		return nil
	})
}
