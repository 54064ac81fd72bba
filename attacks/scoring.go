package attacks

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/fedaudit/fedaudit/attacks/inversion"
)

// scoring is the state of one Score call between its parallel phases: every (attack,
// observation) has its own slot in observed and status, so workers never share one.
type scoring struct {
	env    *Env
	atts   []Attack
	rounds []int
	obs    []Observation
	// observed[a][o] is attack a's observation o; status[a][o] is errMissing when the run
	// lacked what the attack observes.
	observed [][]Observed
	status   [][]error
	// shadow are the pairs the learned attacks were fitted on; learned[a] marks those attacks.
	shadow  map[int64]bool
	learned []bool
	// scored[a] are the pairs a pair-capped attack a scores (nil: every pair); gallery are the
	// pairs whose reconstructions are kept for Result.Reconstructions.
	scored  []map[int64]bool
	gallery map[int64]bool
	// logf receives progress lines (nil: none).
	logf func(format string, args ...any)
}

// errNotScored marks an observation a pair-capped attack leaves out: no score row at all.
var errNotScored = errors.New("pair not scored by this attack")

// galleryPairs is how many of the first pairs keep their reconstructions until tabulate picks
// the first of them that both runs answered.
const galleryPairs = 4

// limitPairs resolves each pair-capped attack's pairs (the first by pair id) and the gallery's
// candidate pairs.
func (sc *scoring) limitPairs(opts Options) {
	ids := pairIDs(sc.obs)
	first := func(n int) map[int64]bool {
		out := map[int64]bool{}
		for _, id := range ids[:min(n, len(ids))] {
			out[id] = true
		}
		return out
	}
	sc.scored = make([]map[int64]bool, len(sc.atts))
	for ai, a := range sc.atts {
		if pc, ok := a.(pairCapped); ok {
			if n := pc.pairCap(sc.env, opts); n > 0 && n < len(ids) {
				sc.scored[ai] = first(n)
			}
		}
	}
	if inversion.ImageShape(sc.env.Shape, sc.env.Dim).C > 0 {
		sc.gallery = first(galleryPairs)
	}
}

// observe runs every attack on every observation in parallel.
func (sc *scoring) observe(ctx context.Context, workers int) error {
	atts, obs := sc.atts, sc.obs
	sc.observed = make([][]Observed, len(atts))
	sc.status = make([][]error, len(atts))
	for ai := range atts {
		sc.observed[ai] = make([]Observed, len(obs))
		sc.status[ai] = make([]error, len(obs))
	}
	progress := sc.progress(len(obs))
	return parallel(ctx, workers, len(atts)*len(obs), func(j int) error {
		ai, oi := j/len(obs), j%len(obs)
		defer progress(ai)
		if sc.scored[ai] != nil && !sc.scored[ai][obs[oi].PairID] {
			sc.status[ai][oi] = errNotScored
			return nil
		}
		o, err := atts[ai].Observe(sc.env, &obs[oi])
		if err != nil && !errors.Is(err, errMissing) {
			return fmt.Errorf("attacks: %s on run %d at round %d: %w", atts[ai].Info().Name, obs[oi].RunID, obs[oi].Round, err)
		}
		if !sc.gallery[obs[oi].PairID] {
			o.Reconstruction = nil // only the gallery's candidates keep theirs
		}
		sc.observed[ai][oi], sc.status[ai][oi] = o, err
		return nil
	})
}

// progress returns what observe calls as each observation of attack ai is done: it logs the
// attacks as they complete every one of their n observations, and how far the stage is at
// least every progressEvery.
func (sc *scoring) progress(n int) func(ai int) {
	if sc.logf == nil || n == 0 {
		return func(int) {}
	}
	var mu sync.Mutex
	done := make([]int, len(sc.atts))
	finished, total, last := 0, 0, time.Now()
	return func(ai int) {
		mu.Lock()
		defer mu.Unlock()
		done[ai]++
		total++
		if done[ai] == n {
			finished++
			sc.logf("attacks: %s done: %d runs at their rounds (%d of %d attacks)", sc.atts[ai].Info().Name, n, finished, len(sc.atts))
			last = time.Now()
		} else if time.Since(last) >= progressEvery {
			sc.logf("attacks: %d of %d done (%d attacks x %d runs at their rounds)", total, n*len(sc.atts), len(sc.atts), n)
			last = time.Now()
		}
	}
}

// fit fits the learned attacks once per (attack, round) on the shadow pairs, which are then
// never scored, and scores every other pair with that one fixed scorer. Given the shadow pairs,
// the evaluated pairs are independent draws scored by the same test, which is what the
// certification (DKW, Clopper-Pearson) assumes; cross-fitted folds, whose scorers depend on
// each other's pairs, would not be.
func (sc *scoring) fit(ctx context.Context, workers int) error {
	type fitJob struct{ ai, round int }
	var fits []fitJob
	for ai, a := range sc.atts {
		if _, ok := a.(Learner); ok {
			sc.learned[ai] = true
			if len(sc.shadow) == 0 {
				return fmt.Errorf("attacks: %s is fitted on shadow pairs (every %d-th pair), and there are only %d pairs", a.Info().Name, shadowEvery(sc.env), len(pairIDs(sc.obs)))
			}
			for ri := range sc.rounds {
				fits = append(fits, fitJob{ai, ri})
			}
		}
	}
	return parallel(ctx, workers, len(fits), func(j int) error {
		return sc.fitOne(fits[j].ai, int32(sc.rounds[fits[j].round]))
	})
}

// fitOne fits learned attack ai at round t and scores the non-shadow observations with it.
func (sc *scoring) fitOne(ai int, t int32) error {
	learner := sc.atts[ai].(Learner)
	var train []Example
	var targets []int
	for oi := range sc.obs {
		if sc.obs[oi].Round != t || sc.status[ai][oi] != nil {
			continue
		}
		if !sc.shadow[sc.obs[oi].PairID] {
			targets = append(targets, oi)
			continue
		}
		o := &sc.obs[oi]
		if !allFinite(sc.observed[ai][oi].Features) {
			// A diverged shadow run says nothing about the test to fit, and its NaN would
			// spoil every fitted coefficient. Leaving it out keeps the scorer a fixed function
			// of the shadow pairs, so the audited pairs' certification is unchanged.
			continue
		}
		train = append(train, Example{RunID: o.RunID, PairID: o.PairID, World: o.World, Features: sc.observed[ai][oi].Features})
	}
	if len(targets) == 0 {
		return nil
	}
	scorer, err := learner.Fit(sc.env, train)
	if errors.Is(err, errFewShadowRuns) {
		sc.unfitted(ai, t, targets, err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("attacks: %s at round %d: fit on %d runs of %d shadow pairs: %w", learner.Info().Name, t, len(train), len(sc.shadow), err)
	}
	for _, oi := range targets {
		// Each observation is in one job (its attack and round), so no two jobs write the same slot.
		sc.observed[ai][oi].Score = scorer(sc.observed[ai][oi].Features)
	}
	return nil
}

// unfitted scores the targets of learned attack ai at round t as missing, because its fit had
// too few usable shadow runs (errFewShadowRuns), and says so. Score 0 for every run is a test
// that depends on nothing, so the row certifies nothing and the other rows keep their
// certificates; failing instead lost every attack's scores, at every round, to one round
// whose shadow pairs mostly lacked the target client's upload.
func (sc *scoring) unfitted(ai int, t int32, targets []int, err error) {
	for _, oi := range targets {
		sc.status[ai][oi] = errMissing // each target is in this job alone (its attack and round)
	}
	if sc.logf != nil {
		sc.logf("attacks: %s at round %d cannot be fitted on its %d shadow pairs (%v): the %d runs it would score there are scored 0, as missing", sc.atts[ai].Info().Name, t, len(sc.shadow), err, len(targets))
	}
}

// allFinite reports whether no value of v is NaN or infinite.
func allFinite(v []float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// Defaults of the shadow split of learned attacks.
const (
	DefaultShadowEvery = 5
	DefaultShadowMax   = 500
)

func shadowEvery(env *Env) int {
	if env.ShadowEvery > 0 {
		return env.ShadowEvery
	}
	return DefaultShadowEvery
}

// pairIDs returns the distinct pair ids of obs, sorted.
func pairIDs(obs []Observation) []int64 {
	var ids []int64
	seen := map[int64]bool{}
	for _, o := range obs {
		if !seen[o.PairID] {
			seen[o.PairID] = true
			ids = append(ids, o.PairID)
		}
	}
	slices.Sort(ids)
	return ids
}

// shadowPairs picks the pairs learned attacks are fitted on: in order of pair id, every k-th
// pair (the k-th, 2k-th, ...), at most limit of them. Both runs of a pair go together, and the
// choice depends on nothing but the pair ids, so it is the same for every attack, round and
// worker count. k <= 0 means DefaultShadowEvery, limit <= 0 DefaultShadowMax; k = 1 is refused
// (it would leave nothing to audit).
func shadowPairs(obs []Observation, k, limit int) (map[int64]bool, error) {
	if k <= 0 {
		k = DefaultShadowEvery
	}
	if k == 1 {
		return nil, errors.New("attacks: ShadowEvery = 1 would fit on every pair and leave none to audit")
	}
	if limit <= 0 {
		limit = DefaultShadowMax
	}
	out := map[int64]bool{}
	for i, id := range pairIDs(obs) {
		if i%k == k-1 && len(out) < limit {
			out[id] = true
		}
	}
	return out, nil
}
