package attacks

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/fedaudit/fedaudit/runs"
)

// initialParams returns w_0 from the Env or the round-0 checkpoint.
func initialParams(env *Env, obs *Observation) []float64 {
	if env.Initial != nil {
		return to64(env.Initial)
	}
	return to64(obs.Initial.Params)
}

// gradDiff returns grad loss(epsilon') - grad loss(epsilon) at w, or -grad loss(epsilon) when C'
// lacks the sample.
func gradDiff(env *Env, w []float64) []float64 {
	g := make([]float64, env.model.NumParams())
	env.model.LossGrad(w, to64(env.Target.Features), int(env.Target.Label), -1, g)
	if env.TargetPrime.Present() {
		env.model.LossGrad(w, to64(env.TargetPrime.Features), int(env.TargetPrime.Label), 1, g)
	}
	return g
}

func to64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// gradAlignAttack measures how far training moved the model along the target's gradient
// difference: <w_T - w_0, g(epsilon') - g(epsilon)> with g the gradient of the loss averaged
// between w_0 and w_T (the trapezoid rule for the gradient along the path). Training on epsilon
// moves w along -g(epsilon), so the score is high in world C.
type gradAlignAttack struct{}

func (gradAlignAttack) Info() Info {
	return Info{Name: "grad-align", Threat: runs.ThreatFinal,
		Needs:   Needs{Params: true, Initial: true, Target: true, Model: true},
		Summary: "gradient alignment <w_T - w_0, grad loss(epsilon') - grad loss(epsilon)>, gradients averaged over w_0 and w_T"}
}

func (gradAlignAttack) Observe(env *Env, obs *Observation) (Observed, error) {
	w0 := initialParams(env, obs)
	wT := to64(obs.Row.Params)
	if err := checkParamLen(env, wT); err != nil {
		return Observed{}, err
	}
	g0, gT := gradDiff(env, w0), gradDiff(env, wT)
	var s float64
	for i := range wT {
		s += (wT[i] - w0[i]) * (g0[i] + gT[i]) / 2
	}
	return Observed{Score: s}, nil
}

// linearAttack is a learned linear distinguisher on the movement w_T - w_0 projected onto a few
// directions: the target's gradient difference at w_0 and at w_T (unit length) and
// linearRandomDirections fixed random unit directions (seeded by Env.Seed, the same for every
// run), which let the fit see how much noise the projections carry. The fit is linear
// discriminant analysis (shared covariance with a small ridge), fitted on the shadow pairs.
type linearAttack struct{}

const linearRandomDirections = 4

func (linearAttack) Info() Info {
	return Info{Name: "linear", Threat: runs.ThreatFinal, Learned: true,
		Needs:   Needs{Params: true, Initial: true, Target: true, Model: true},
		Summary: "LDA on w_T - w_0 projected onto the target's gradient differences and fixed random directions, fitted on shadow pairs"}
}

func unit(v []float64) []float64 {
	n := math.Sqrt(dot(v, v))
	out := make([]float64, len(v))
	if n > 0 {
		for i, x := range v {
			out[i] = x / n
		}
	}
	return out
}

// randomDirections draws k unit vectors of dimension d from seed with a splitmix64 stream and the
// Box-Muller transform; they depend on nothing else.
func randomDirections(seed uint64, k, d int) [][]float64 {
	state := seed ^ 0x6c696e656172
	next := func() float64 {
		state += 0x9e3779b97f4a7c15
		z := state
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		return (float64(z>>11) + 0.5) / (1 << 53)
	}
	out := make([][]float64, k)
	for j := range out {
		v := make([]float64, d)
		for i := range v {
			v[i] = math.Sqrt(-2*math.Log(next())) * math.Cos(2*math.Pi*next())
		}
		out[j] = unit(v)
	}
	return out
}

func (linearAttack) Observe(env *Env, obs *Observation) (Observed, error) {
	w0 := initialParams(env, obs)
	wT := to64(obs.Row.Params)
	if err := checkParamLen(env, wT); err != nil {
		return Observed{}, err
	}
	move := make([]float64, len(wT))
	for i := range wT {
		move[i] = wT[i] - w0[i]
	}
	dirs := [][]float64{unit(gradDiff(env, w0)), unit(gradDiff(env, wT))}
	dirs = append(dirs, env.cache.directions(env.Seed, len(wT))...)
	f := make([]float64, len(dirs))
	for j, d := range dirs {
		f[j] = dot(move, d)
	}
	return Observed{Features: f}, nil
}

func (linearAttack) Fit(_ *Env, examples []Example) (func([]float64) float64, error) {
	return fitLDA(examples)
}

// fitLDA fits Fisher's linear discriminant: direction Sigma^-1 (mean_C - mean_C'), Sigma the
// pooled within-world covariance plus a ridge of 1e-6 of its mean variance (directions that
// coincide, as the two gradient directions do for the quadratic model, make it singular).
func fitLDA(examples []Example) (func([]float64) float64, error) {
	if len(examples) == 0 {
		return nil, fmt.Errorf("%w: no runs to fit on", errFewShadowRuns)
	}
	p := len(examples[0].Features)
	var n [2]float64
	mean := [2][]float64{make([]float64, p), make([]float64, p)}
	for _, e := range examples {
		w := 0
		if e.World == runs.WorldCPrime {
			w = 1
		}
		n[w]++
		for j, v := range e.Features {
			mean[w][j] += v
		}
	}
	if n[0] < 2 || n[1] < 2 {
		return nil, fmt.Errorf("%w: need at least 2 runs of each world, have %v of C and %v of C'", errFewShadowRuns, n[0], n[1])
	}
	for w := range mean {
		for j := range mean[w] {
			mean[w][j] /= n[w]
		}
	}
	cov := mat.NewSymDense(p, nil)
	for _, e := range examples {
		w := 0
		if e.World == runs.WorldCPrime {
			w = 1
		}
		for a := 0; a < p; a++ {
			for b := a; b < p; b++ {
				cov.SetSym(a, b, cov.At(a, b)+(e.Features[a]-mean[w][a])*(e.Features[b]-mean[w][b]))
			}
		}
	}
	var tr float64
	for a := 0; a < p; a++ {
		tr += cov.At(a, a)
	}
	ridge := 1e-6*tr/float64(p) + 1e-300
	for a := 0; a < p; a++ {
		cov.SetSym(a, a, cov.At(a, a)+ridge)
	}
	diff := mat.NewVecDense(p, nil)
	for j := 0; j < p; j++ {
		diff.SetVec(j, mean[0][j]-mean[1][j])
	}
	var chol mat.Cholesky
	if !chol.Factorize(cov) {
		return nil, fmt.Errorf("pooled covariance is not positive definite")
	}
	var dir mat.VecDense
	if err := chol.SolveVecTo(&dir, diff); err != nil {
		return nil, fmt.Errorf("solve: %w", err)
	}
	coef := make([]float64, p)
	var offset float64
	for j := range coef {
		coef[j] = dir.AtVec(j)
		offset += coef[j] * (mean[0][j] + mean[1][j]) / 2
	}
	return func(f []float64) float64 { return dot(coef, f) - offset }, nil
}

// gradCanaryAttack is the final-model adversary of a gradient canary (adjacency kind gradient,
// train.Config.GradientCanary) and of a crafted canary client (adjacency.crafted_update,
// train.Config.CraftedUpdate). A gradient canary adds Norm u to the target's gradient in every
// step of C' that uses it, so the C' world's model moves along -u; the canary client sends
// clip_t u in the rounds it is sampled in C, so the C world's model moves along +u. Either way
// the score is the final model's coordinate along the public direction, <w_T, u>, high in
// world C. It needs no model: on a model whose losses were linear this projection is the
// Neyman-Pearson statistic of the final model (the mean shift lies along u, the noise is
// isotropic; with client sampling the likelihood ratio of the mixture is increasing in it),
// the case the last-iterate heuristic describes.
type gradCanaryAttack struct{}

func (gradCanaryAttack) Info() Info {
	return Info{Name: "grad-canary", Threat: runs.ThreatFinal, Needs: Needs{Params: true},
		ByName:  "it reads the direction of a gradient canary (adjacency kind gradient) or a crafted update (adjacency.crafted_update), which it is the default attack of",
		Summary: "projection <w_T, u> of the final model on the public direction u of a gradient canary or a crafted canary client"}
}

func (gradCanaryAttack) Observe(env *Env, obs *Observation) (Observed, error) {
	var dir directed
	switch {
	case env.Config.GradientCanary != nil:
		dir = env.Config.GradientCanary
	case env.Config.CraftedUpdate != nil:
		dir = env.Config.CraftedUpdate
	default:
		return Observed{}, fmt.Errorf("grad-canary: the runs have no gradient canary (adjacency kind gradient) and no crafted update (adjacency.crafted_update)")
	}
	w := obs.Row.Params
	u := env.cache.canaryDirection(dir, env.Config.Seed, len(w))
	var s float64
	for i, x := range w {
		if u[i] != 0 {
			s += float64(x) * float64(u[i])
		}
	}
	return Observed{Score: s}, nil
}
