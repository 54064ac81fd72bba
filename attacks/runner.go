package attacks

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/fedaudit/fedaudit/attacks/inversion"
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
	// Logf, when set, receives progress: a line as each attack has observed every run, and one
	// at least every progressEvery while they work (invgrad at 20 checkpoints ran two minutes
	// without a word).
	Logf func(format string, args ...any)
}

// progressEvery is the longest the attack stage stays silent while it observes the runs.
const progressEvery = 30 * time.Second

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
	env.ctx = ctx
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
	sc.logf = opts.Logf
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
	for _, t := range asked {
		if !slices.Contains(env.Config.Checkpoints, t) {
			return nil, &NotACheckpointError{Round: t, Checkpoints: env.Config.Checkpoints}
		}
	}
	rounds = slices.Clone(rounds)
	slices.Sort(rounds)
	return slices.Compact(rounds), nil
}

// NotACheckpointError is a round asked for that the runs do not record: a mistake of the
// caller's (exit status 2 in the CLI), not a failure of the run files.
type NotACheckpointError struct {
	Round       int
	Checkpoints []int
}

func (e *NotACheckpointError) Error() string {
	return fmt.Sprintf("round %d is not a checkpoint of the runs (they record rounds %v)", e.Round, e.Checkpoints)
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
