package attacks

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/fedaudit/fedaudit/attacks/inversion"
	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/runs"
)

// Options selects what Score computes.
type Options struct {
	// Attacks names the attacks to run; the caller resolves its default (Default lists what a
	// run file supports), so that it is set in one place. Empty is an error.
	Attacks []string
	// Rounds are the checkpoints T to score; nil means every checkpoint of Env.Config except 0.
	Rounds []int
	// Workers is the number of goroutines; 0 means GOMAXPROCS. Results do not depend on it.
	Workers int
	// InvgradPairs caps the pairs invgrad reconstructs at each round, for its cost (a LeNet-5
	// reconstruction takes seconds): the first InvgradPairs pairs by pair id, both runs of
	// each, are scored and the others get no invgrad score at all (so its audit rests on those
	// pairs alone; the choice depends on pair ids only, so they are still i.i.d. draws). 0 means
	// DefaultInvgradPairsCNN for a CNN and every pair for the other models; negative means
	// every pair.
	InvgradPairs int
	// InvgradIterations is invgrad's signed-Adam iterations per restart; 0 means 400. Fewer
	// cost less and reconstruct worse.
	InvgradIterations int
}

// DefaultInvgradPairsCNN is Options.InvgradPairs's default for CNNs.
const DefaultInvgradPairsCNN = 8

// pairCapped is an attack that scores at most pairCap pairs per round (0: every pair).
type pairCapped interface {
	pairCap(env *Env, opts Options) int
}

// Metrics summarizes one attack at one round.
type Metrics struct {
	Attack string
	Threat string
	Round  int32
	// Runs is the number of scores; Missing of them are 0 because the run lacked the observation
	// (e.g. the target client did not take part in round T-1), NonFinite because the attack's
	// value was NaN (a diverged run). An infinite value keeps its rank: it is placed just beyond
	// the round's finite scores (audit.FiniteRanks).
	Runs, Missing, NonFinite int
	// AUC is the area under the ROC curve of the scores for telling C from C' (0.5: chance),
	// ties counted one half.
	AUC float64
	// Accuracy is the best balanced accuracy over all thresholds.
	Accuracy float64
	// Means holds the mean of every per-run metric of the attack over runs where it is defined.
	Means map[string]float64
}

// Result is what Score computes.
type Result struct {
	// MetricNames names the metric columns of Scores: the union of the attacks' metrics. A score
	// holds NaN for metrics its attack does not report.
	MetricNames []string
	// Scores are ordered by attack (as requested), round, then run id.
	Scores []runs.Score
	// Summary holds one entry per attack and round, in the same order.
	Summary []Metrics
	// Reconstructions are, for each attack that reconstructs the target sample and each round,
	// its reconstructions from both runs of one pair (the first pair by id, among the first four,
	// whose two runs it scored): for the report's gallery. Kept only when Env.Shape describes an
	// image.
	Reconstructions []Reconstruction
}

// Reconstruction is an attack's reconstruction of the sample that differs between the worlds,
// from one run: X in the sample's layout (Env.Shape), with the attack's metrics against the
// sample of the run's world.
type Reconstruction struct {
	Attack        string
	Round         int32
	RunID, PairID int64
	World         int8
	X             []float64
	Metrics       []float64 // the attack's Info().Metrics, in order
}

// Score runs attacks on the runs of table at the given rounds. It reads the table once, keeping
// per run only the rows and columns the attacks need: with params-based attacks that is
// runs x (rounds needed) parameter vectors, where the rounds needed are T, T-1 for upload attacks
// and 0 when Env.Initial is not given.
func Score(ctx context.Context, table *runs.Table, env Env, opts Options) (*Result, error) {
	env.Meta = table.Meta()
	if opts.InvgradIterations < 0 {
		return nil, fmt.Errorf("attacks: invgrad iterations %d, need >= 0", opts.InvgradIterations)
	}
	env.invgrad = inversion.Config{Iterations: opts.InvgradIterations}
	if len(opts.Attacks) == 0 {
		return nil, errors.New("attacks: the run file supports no attack (no statistics, params or uploads recorded)")
	}
	var atts []Attack
	for _, n := range opts.Attacks {
		a, err := Lookup(n)
		if err != nil {
			return nil, fmt.Errorf("attacks: %w", err)
		}
		atts = append(atts, a)
	}
	return score(ctx, table, &env, atts, opts)
}

// score runs the attacks in phases: check the selection, resolve the rounds, read the rows
// and columns they need (collect), pair them into observations, observe every (attack,
// observation) in parallel, fit the learned attacks on the shadow pairs, and tabulate.
func score(ctx context.Context, table *runs.Table, env *Env, atts []Attack, opts Options) (*Result, error) {
	if err := checkSelection(env, atts); err != nil {
		return nil, err
	}
	rounds, err := scoredRounds(env, opts.Rounds)
	if err != nil {
		return nil, err
	}
	needs := combinedNeeds(atts)
	if err := checkRounds(rounds, needs); err != nil {
		return nil, err
	}
	initialFromFile := needs.Initial && env.Initial == nil
	keepRow, keepParams, keepUpload := keptColumns(rounds, needs, initialFromFile)
	store, err := collect(ctx, table, keepRow, keepParams, keepUpload)
	if err != nil {
		return nil, err
	}
	if len(store.ids) == 0 {
		return nil, fmt.Errorf("attacks: %s holds no rows at the rounds scored (%v)", table.Path(), rounds)
	}
	obs, err := observations(store, rounds, needs.Upload, initialFromFile)
	if err != nil {
		return nil, err
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	// The shadow pairs depend on the pair ids alone: the same for every attack and round.
	shadow, err := shadowPairs(obs, env.ShadowEvery, env.ShadowMax)
	if err != nil {
		return nil, err
	}
	sc := &scoring{env: env, atts: atts, rounds: rounds, obs: obs, shadow: shadow, learned: make([]bool, len(atts))}
	sc.limitPairs(opts)
	if err := sc.observe(ctx, workers); err != nil {
		return nil, err
	}
	if err := sc.fitVectors(ctx, workers); err != nil {
		return nil, err
	}
	// Parameters are no longer needed: let them go before fitting.
	store = nil
	for i := range sc.obs {
		sc.obs[i].Row.Params, sc.obs[i].Row.Upload, sc.obs[i].Prev, sc.obs[i].Initial = nil, nil, nil, nil
	}
	if err := sc.fit(ctx, workers); err != nil {
		return nil, err
	}
	return sc.tabulate(), nil
}

// checkSelection refuses an empty selection, an attack selected twice, and an attack the run
// file or Env cannot serve.
func checkSelection(env *Env, atts []Attack) error {
	if len(atts) == 0 {
		return errors.New("attacks: no attack selected")
	}
	env.cache = &envCache{}
	seen := map[string]bool{}
	for _, a := range atts {
		name := a.Info().Name
		if seen[name] {
			return fmt.Errorf("attacks: attack %s selected twice", name)
		}
		seen[name] = true
		if err := check(a, env); err != nil {
			return fmt.Errorf("attacks: %w", err)
		}
	}
	return nil
}

// scoredRounds is the sorted, distinct rounds to score: those asked for, else every checkpoint
// of the config after round 0.
func scoredRounds(env *Env, asked []int) ([]int, error) {
	rounds := asked
	if rounds == nil {
		for _, t := range env.Config.Checkpoints {
			if t > 0 {
				rounds = append(rounds, t)
			}
		}
		if len(rounds) == 0 {
			return nil, errors.New("attacks: no rounds to score: the config lists no checkpoint after round 0")
		}
	}
	rounds = slices.Clone(rounds)
	slices.Sort(rounds)
	return slices.Compact(rounds), nil
}

// combinedNeeds is what any of the attacks needs beyond the statistics.
func combinedNeeds(atts []Attack) Needs {
	var needs Needs
	for _, a := range atts {
		n := a.Info().Needs
		needs.Params = needs.Params || n.Params
		needs.Initial = needs.Initial || n.Initial
		needs.Upload = needs.Upload || n.Upload
	}
	return needs
}

func checkRounds(rounds []int, needs Needs) error {
	for _, t := range rounds {
		if t < 0 || t > math.MaxInt32 {
			return fmt.Errorf("attacks: round %d out of range", t)
		}
		if needs.Upload && t == 0 {
			return errors.New("attacks: upload attacks need a round T >= 1 (there is no upload before round 1)")
		}
	}
	return nil
}

// keptColumns says which rounds' rows, parameters and uploads collect keeps: the rounds
// scored, the round before each for upload attacks (the model w_{T-1} the upload started
// from), and round 0 when w_0 comes from the file.
func keptColumns(rounds []int, needs Needs, initialFromFile bool) (keepRow, keepParams, keepUpload map[int32]bool) {
	keepRow, keepParams, keepUpload = map[int32]bool{}, map[int32]bool{}, map[int32]bool{}
	for _, t := range rounds {
		t := int32(t)
		keepRow[t] = true
		if needs.Params {
			keepParams[t] = true
		}
		if needs.Upload {
			keepUpload[t] = true
			keepRow[t-1], keepParams[t-1] = true, true
		}
	}
	if initialFromFile {
		keepRow[0], keepParams[0] = true, true
	}
	return keepRow, keepParams, keepUpload
}

// observations pairs the kept rows into what the attacks observe: rounds ascending, runs by
// id, each with the previous checkpoint (upload attacks) and round 0 (w_0 from the file) where
// needed.
func observations(store *runStore, rounds []int, upload, initialFromFile bool) ([]Observation, error) {
	var obs []Observation
	for _, t := range rounds {
		t := int32(t)
		for _, id := range store.ids {
			rr := store.rows[id]
			row, ok := rr[t]
			if !ok {
				continue
			}
			o := Observation{RunID: id, PairID: row.PairID, World: row.World, Round: t, Row: *row}
			if upload {
				if o.Prev = rr[t-1]; o.Prev == nil {
					return nil, fmt.Errorf("attacks: run %d has no checkpoint at round %d: upload attacks at round %d need the global model w_%d (add %d to checkpoints)", id, t-1, t, t-1, t-1)
				}
			}
			if initialFromFile {
				if o.Initial = rr[0]; o.Initial == nil {
					return nil, fmt.Errorf("attacks: run %d has no checkpoint at round 0 and Env.Initial is not given: attacks using w_0 need one of them", id)
				}
			}
			obs = append(obs, o)
		}
	}
	if len(obs) == 0 {
		return nil, fmt.Errorf("attacks: no run has a checkpoint at rounds %v", rounds)
	}
	return obs, nil
}

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
	return parallel(ctx, workers, len(atts)*len(obs), func(j int) error {
		ai, oi := j/len(obs), j%len(obs)
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
		train = append(train, Example{RunID: o.RunID, PairID: o.PairID, World: o.World, Features: sc.observed[ai][oi].Features})
	}
	if len(targets) == 0 {
		return nil
	}
	scorer, err := learner.Fit(sc.env, train)
	if err != nil {
		return fmt.Errorf("attacks: %s at round %d: fit on %d runs of %d shadow pairs: %w", learner.Info().Name, t, len(train), len(sc.shadow), err)
	}
	for _, oi := range targets {
		// Each observation is in one job (its attack and round), so no two jobs write the same slot.
		sc.observed[ai][oi].Score = scorer(sc.observed[ai][oi].Features)
	}
	return nil
}

// tabulate turns the observations into score rows and per (attack, round) summaries, in the
// order of the attacks, then rounds, then observations.
func (sc *scoring) tabulate() *Result {
	res := &Result{MetricNames: metricNames(sc.atts)}
	for ai, a := range sc.atts {
		info := a.Info()
		col := make([]int, len(info.Metrics))
		for i, m := range info.Metrics {
			col[i] = slices.Index(res.MetricNames, m)
		}
		for _, t := range sc.rounds {
			sc.tabulateRound(res, ai, info, col, int32(t))
			res.Reconstructions = append(res.Reconstructions, sc.reconstructions(ai, info, int32(t))...)
		}
	}
	return res
}

// reconstructions returns attack ai's reconstructions at round t from both runs of the first
// gallery pair (by id) whose two runs it scored with a reconstruction, or none.
func (sc *scoring) reconstructions(ai int, info Info, t int32) []Reconstruction {
	byPair := map[int64][]Reconstruction{}
	var pairs []int64
	for oi := range sc.obs {
		o := &sc.obs[oi]
		ob := &sc.observed[ai][oi]
		if o.Round != t || sc.status[ai][oi] != nil || ob.Reconstruction == nil {
			continue
		}
		if byPair[o.PairID] == nil {
			pairs = append(pairs, o.PairID)
		}
		byPair[o.PairID] = append(byPair[o.PairID], Reconstruction{Attack: info.Name, Round: t, RunID: o.RunID,
			PairID: o.PairID, World: o.World, X: ob.Reconstruction, Metrics: ob.Metrics})
	}
	slices.Sort(pairs)
	for _, id := range pairs {
		if rs := byPair[id]; len(rs) == 2 {
			slices.SortFunc(rs, func(a, b Reconstruction) int { return int(a.World) - int(b.World) })
			return rs
		}
	}
	return nil
}

// tabulateRound appends the scores of attack ai at round t to res, and their summary. col maps
// the attack's metrics to the result's metric columns.
func (sc *scoring) tabulateRound(res *Result, ai int, info Info, col []int, t int32) {
	sum := Metrics{Attack: info.Name, Threat: info.Threat, Round: t, Means: map[string]float64{}}
	sums := make([]float64, len(info.Metrics))
	counts := make([]int, len(info.Metrics))
	var scores []float64
	var worlds []int8
	first := len(res.Scores)
	for oi := range sc.obs {
		o := &sc.obs[oi]
		if o.Round != t || sc.learned[ai] && sc.shadow[o.PairID] || errors.Is(sc.status[ai][oi], errNotScored) {
			continue // shadow pairs fitted the learned attacks and are not audited; capped pairs are not scored
		}
		s := runs.Score{RunID: o.RunID, PairID: o.PairID, World: o.World, Round: t, Attack: info.Name, Threat: info.Threat}
		s.Metrics = make([]float64, len(res.MetricNames))
		for i := range s.Metrics {
			s.Metrics[i] = math.NaN()
		}
		sum.Runs++
		if sc.status[ai][oi] != nil {
			sum.Missing++
		} else {
			v := sc.observed[ai][oi].Score
			if math.IsNaN(v) {
				sum.NonFinite++ // a diverged run: nothing to rank it by
				v = 0
			}
			s.Score = v
			for i, m := range sc.observed[ai][oi].Metrics {
				s.Metrics[col[i]] = m
				if !math.IsNaN(m) {
					sums[i] += m
					counts[i]++
				}
			}
		}
		scores = append(scores, s.Score)
		worlds = append(worlds, s.World)
		res.Scores = append(res.Scores, s)
	}
	// Infinite scores keep their rank (a canary's loss of exactly 0 in world C), written finite.
	audit.FiniteRanks(scores)
	for i := range scores {
		res.Scores[first+i].Score = scores[i]
	}
	for i, m := range info.Metrics {
		if counts[i] > 0 {
			sum.Means[m] = sums[i] / float64(counts[i])
		}
	}
	sum.AUC, sum.Accuracy = rocSummary(scores, worlds)
	res.Summary = append(res.Summary, sum)
}

// runStore holds the kept rows of every run by round.
type runStore struct {
	ids  []int64
	rows map[int64]map[int32]*runs.Row
}

func collect(ctx context.Context, table *runs.Table, keepRow, keepParams, keepUpload map[int32]bool) (*runStore, error) {
	st := &runStore{rows: map[int64]map[int32]*runs.Row{}}
	pairs := map[int64][2]int64{} // run -> (pair, world)
	err := table.Scan(ctx, func(r runs.Row) error {
		if p, ok := pairs[r.RunID]; ok && (p[0] != r.PairID || p[1] != int64(r.World)) {
			return fmt.Errorf("run %d appears with pair %d world %d and with pair %d world %d", r.RunID, p[0], p[1], r.PairID, r.World)
		}
		pairs[r.RunID] = [2]int64{r.PairID, int64(r.World)}
		if !keepRow[r.Round] {
			return nil
		}
		if !keepParams[r.Round] {
			r.Params = nil
		}
		if !keepUpload[r.Round] {
			r.Upload = nil
		}
		m := st.rows[r.RunID]
		if m == nil {
			m = map[int32]*runs.Row{}
			st.rows[r.RunID] = m
			st.ids = append(st.ids, r.RunID)
		}
		if _, dup := m[r.Round]; dup {
			return fmt.Errorf("run %d has two rows at round %d", r.RunID, r.Round)
		}
		m[r.Round] = &r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("attacks: read %s: %w", table.Path(), err)
	}
	slices.Sort(st.ids)
	return st, nil
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

// parallel runs fn(0..n-1) on workers goroutines and returns the first error by index order, so
// that which error is reported does not depend on scheduling.
func parallel(ctx context.Context, workers, n int, fn func(int) error) error {
	if n == 0 {
		return nil
	}
	workers = min(workers, n)
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				errs[j] = fn(j)
			}
		}()
	}
	var ctxErr error
loop:
	for j := 0; j < n; j++ {
		select {
		case next <- j:
		case <-ctx.Done():
			ctxErr = ctx.Err()
			break loop
		}
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return ctxErr
}

// rocSummary returns the AUC (ties one half) and the best balanced accuracy of scores for
// telling world C (positive) from C'.
func rocSummary(scores []float64, worlds []int8) (auc, acc float64) {
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return scores[idx[a]] > scores[idx[b]] })
	var nc, np float64
	for _, w := range worlds {
		if w == runs.WorldC {
			nc++
		} else {
			np++
		}
	}
	if nc == 0 || np == 0 {
		return math.NaN(), math.NaN()
	}
	// Walk thresholds from high to low; tied scores move together.
	var tp, fp float64
	acc = 0.5
	for i := 0; i < len(idx); {
		j := i
		var dtp, dfp float64
		for j < len(idx) && scores[idx[j]] == scores[idx[i]] {
			if worlds[idx[j]] == runs.WorldC {
				dtp++
			} else {
				dfp++
			}
			j++
		}
		auc += dfp * (tp + dtp/2)
		tp += dtp
		fp += dfp
		acc = math.Max(acc, (tp/nc+1-fp/np)/2)
		i = j
	}
	return auc / (nc * np), acc
}

// WriteScores writes res to a score file at path, carrying the run file's config and dataset
// hash.
func WriteScores(path string, meta runs.Meta, toolVersion string, res *Result) (err error) {
	w, err := runs.CreateScores(path, runs.ScoreMeta{Config: meta.Config, DatasetHash: meta.DatasetHash, ToolVersion: toolVersion, MetricNames: res.MetricNames})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			w.Abort()
		}
	}()
	if err := w.Write(res.Scores...); err != nil {
		return err
	}
	return w.Close()
}
