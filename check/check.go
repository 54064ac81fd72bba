package check

import (
	"context"
	"fmt"
	"github.com/fedaudit/fedaudit/findings"
	"maps"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/importer"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/model"
)

// Options tune Run.
type Options struct {
	// Alpha is the family-wise error level of the statistical checks; 0 means 0.05.
	Alpha float64
	// MaxPairs is how many pairs are checked, the ones with the smallest ids; 0 means 8. The
	// checks hold every round of those pairs in memory.
	MaxPairs int
	// Logf receives progress; nil discards it.
	Logf func(format string, args ...any)
}

// recorded is one run's rounds: params[t] = w_t and upload[t] the target's upload of round t-1
// (nil at round 0 and where the target sat the round out).
type recorded struct {
	params, upload map[int][]float32
}

// Run checks the runs of the experiment directory dir.
func Run(ctx context.Context, dir string, opts Options) (*findings.CheckReport, error) {
	if opts.Alpha == 0 {
		opts.Alpha = 0.05
	}
	if !(opts.Alpha > 0 && opts.Alpha < 1) {
		return nil, fmt.Errorf("check: alpha %v is not in (0, 1)", opts.Alpha)
	}
	if opts.MaxPairs == 0 {
		opts.MaxPairs = 8
	}
	if opts.MaxPairs < 0 {
		return nil, fmt.Errorf("check: pairs %d is negative", opts.MaxPairs)
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	d := expdir.Dir(dir)
	pairs, meta, rounds, diverged, err := readPairs(ctx, d.Runs(), opts.MaxPairs)
	if err != nil {
		return nil, err
	}
	// What the runs trained is what they are checked against, as every stage reads them.
	cfg, err := experiment.DirConfig(dir, meta)
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	logf("check: %d pairs, rounds %d..%d", len(pairs), rounds[0], rounds[len(rounds)-1])
	c := &checker{cfg: cfg.Train, pairs: len(pairs), hasUpload: meta.HasUpload, rounds: rounds}
	if diverged > 0 {
		c.skipped = append(c.skipped, findings.CheckSkipped{Check: fmt.Sprintf("%d pairs with a diverged run", diverged),
			Why: "left out of every check: a diverged run keeps its last finite parameters, so its later rounds do not follow the declared mechanism (rounds.json \"diverged\")"})
	}
	_, statErr := os.Stat(importer.ImportPath(dir))
	if err := c.prepare(ctx, cfg, statErr == nil); err != nil {
		return nil, err
	}
	if err := c.participation(ctx, cfg, d.Runs()); err != nil {
		return nil, err
	}
	for i, p := range pairs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := c.pair(ctx, p); err != nil {
			return nil, fmt.Errorf("check: pair %d: %w", p.id, err)
		}
		logf("check: pair %d checked (%d of %d)", p.id, i+1, len(pairs))
	}
	return c.report(opts.Alpha, len(pairs)), nil
}

// pairRuns is one pair's two runs, world C at index 0.
type pairRuns struct {
	id   int64
	runs [2]recorded
}

// readPairs reads the rounds of the max pairs of smallest id from the run files at path, and the
// sorted rounds every run of them recorded. Pairs with a run that diverged are left out (their
// number is returned): such a run keeps its last finite parameters, and its rounds after that
// would fail the checks of a correct deployment (clipping skipped, noise off its scale).
func readPairs(ctx context.Context, path string, maxPairs int) ([]*pairRuns, runs.Meta, []int, int, error) {
	table, err := runs.Open(path)
	if err != nil {
		return nil, runs.Meta{}, nil, 0, fmt.Errorf("check: %w", err)
	}
	defer table.Close()
	meta := table.Meta()
	if !meta.HasParams {
		return nil, meta, nil, 0, fmt.Errorf("check: the runs in %s record no parameters: every check reads the global model of each round (train.record_params: true, every round a checkpoint; or import the snapshots)", path)
	}
	ids, diverged := map[int64]bool{}, map[int64]bool{}
	if err := table.Scan(ctx, func(r runs.Row) error {
		ids[r.PairID] = true
		if r.Diverged {
			diverged[r.PairID] = true
		}
		return nil
	}); err != nil {
		return nil, meta, nil, 0, fmt.Errorf("check: %w", err)
	}
	keep := slices.DeleteFunc(slices.Sorted(maps.Keys(ids)), func(id int64) bool { return diverged[id] })
	if len(keep) == 0 && len(ids) > 0 {
		return nil, meta, nil, 0, fmt.Errorf("check: every pair in %s has a run that diverged (rounds.json \"diverged\"): a diverged run keeps its last finite parameters, so its rounds do not follow the declared mechanism and no check applies; lower the learning rate (or the clip norm) until the runs converge", path)
	}
	keep = keep[:min(len(keep), maxPairs)]
	byID := map[int64]*pairRuns{}
	for _, id := range keep {
		p := &pairRuns{id: id}
		for w := range p.runs {
			p.runs[w] = recorded{params: map[int][]float32{}, upload: map[int][]float32{}}
		}
		byID[id] = p
	}
	roundSet := map[int]bool{}
	err = table.Scan(ctx, func(r runs.Row) error {
		p := byID[r.PairID]
		if p == nil {
			return nil
		}
		if r.World != runs.WorldC && r.World != runs.WorldCPrime {
			return fmt.Errorf("run %d has world %d", r.RunID, r.World)
		}
		rec := p.runs[r.World]
		t := int(r.Round)
		rec.params[t] = slices.Clone(r.Params)
		if r.Upload != nil && !math.IsNaN(float64(firstOr(r.Upload))) {
			rec.upload[t] = slices.Clone(r.Upload)
		}
		roundSet[t] = true
		return nil
	})
	if err != nil {
		return nil, meta, nil, 0, fmt.Errorf("check: %w", err)
	}
	rounds := slices.Sorted(maps.Keys(roundSet))
	out := make([]*pairRuns, 0, len(keep))
	for _, id := range keep {
		p := byID[id]
		for w, rec := range p.runs {
			if len(rec.params) != len(rounds) {
				return nil, meta, nil, 0, fmt.Errorf("check: pair %d world %d records %d of the %d rounds the other runs record", id, w, len(rec.params), len(rounds))
			}
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, meta, nil, 0, fmt.Errorf("check: no runs in %s", path)
	}
	return out, meta, rounds, len(diverged), nil
}

func firstOr(v []float32) float32 {
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

// checker accumulates the checks over the pairs.
type checker struct {
	cfg       train.Config
	pairs     int // pairs checked
	hasUpload bool
	rounds    []int
	data      *spec.Data
	layout    importer.Layout

	skipped []findings.CheckSkipped
	// extra are statistical checks of the whole directory (participation), in the family.
	extra []findings.CheckResult
	// w0 is the first run's w_0, and w0Diff the largest difference from it.
	w0     []float32
	w0Diff float64
	// Coupled differences: the largest ratio of the difference to the declared bound per
	// observer, where the bound is known.
	bounded    bool
	diffRatio  [2]float64
	diffN      [2]int
	diffAt     [2]string
	replayable bool
	job        train.Job
	// round1Bound, when positive, is the declared bound on |w_1 - w_1'| of the DP-FedAvg
	// family's runs and of dpsgd's with one local step (round1Difference), what it is (for
	// the report), and the largest ratio found and where.
	round1Bound float64
	round1What  string
	round1Ratio float64
	round1N     int
	round1At    string
	tallies     [2][]*noiseTally // per observer, per tensor
	coupling    [2]couplingTally
	lastResidue [2][]float32 // world C's residual of the previous round, per observer
}

const (
	global = 0
	upload = 1
)

var observerNames = [2]string{"global", "upload"}

// prepare decides which checks can run and sets up the replay; imported says the runs were
// trained elsewhere.
func (c *checker) prepare(ctx context.Context, cfg *spec.Config, imported bool) error {
	switch {
	case c.cfg.Algorithm == algo.FedAvg || c.cfg.Algorithm == algo.FedProx:
		if c.cfg.ClipNorm > 0 {
			c.bounded = true
		} else {
			c.skip("coupled-difference", "clip_norm is 0: the deployment declares no bound on an update")
		}
	case c.cfg.Algorithm == algo.DPSGD:
		c.skip("coupled-difference", "dpsgd sums per-example gradients: the worlds' difference is bounded only at a shared model, not once their models differ (but for round 1 with one local step)")
		if err := c.prepareRound1(ctx, cfg, imported); err != nil {
			return err
		}
	default:
		c.skip("coupled-difference", fmt.Sprintf("%s clips and noises on the server: the bound on a coupled difference needs the round's participants, which run files do not record, after round 1", c.cfg.Algorithm))
		if err := c.prepareRound1(ctx, cfg, imported); err != nil {
			return err
		}
	}
	if c.cfg.Model.Kind == model.External {
		c.skip("noise residuals", "model kind external: fedaudit cannot replay a model it does not know")
		return nil
	}
	data, err := spec.PrepareContext(ctx, cfg)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	c.data = data
	if err := train.Replayable(c.cfg, len(data.Pair.C)); err != nil {
		c.skip("noise residuals", fmt.Sprintf("the rounds cannot be replayed without noise: %s", strings.ReplaceAll(err.Error(), "\n", "; ")))
		return nil
	}
	for i, t := range c.rounds {
		if t != i {
			c.skip("noise residuals", fmt.Sprintf("needs every round from 0 as a checkpoint (the runs record %v)", c.rounds))
			return nil
		}
	}
	if len(c.rounds) < 2 {
		c.skip("noise residuals", "needs at least rounds 0 and 1")
		return nil
	}
	lay, err := importer.LayoutOf(c.cfg.Model, data.Pair.C[0].Shape, data.Classes)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	c.layout = lay
	c.replayable = true
	c.job = train.Job{Config: c.cfg, WorldC: data.Pair.C, WorldCPrime: data.Pair.CPrime, Target: data.Target, Test: data.Test}
	if !c.hasUpload {
		c.skip("upload noise residuals", "the runs record no uploads of the target client (train.record_upload, or the manifest's upload rows)")
	}
	return nil
}

func (c *checker) skip(check, why string) {
	c.skipped = append(c.skipped, findings.CheckSkipped{Check: check, Why: why})
}

// noiseStd is the declared standard deviation of one coordinate of each observer's residual:
// sigma / sqrt(n) for the global model averaging n noisy uploads, sigma for an upload.
func (c *checker) noiseStd(obs int) float64 {
	if obs == upload {
		return c.cfg.NoiseStd
	}
	n := c.cfg.Participants
	if n == 0 {
		n = len(c.data.Pair.C)
	}
	return c.cfg.NoiseStd / math.Sqrt(float64(n))
}

// pair runs every check on one pair.
func (c *checker) pair(ctx context.Context, p *pairRuns) error {
	for w := range p.runs {
		c.sharedW0(p.runs[w].params[c.rounds[0]])
	}
	if c.bounded {
		c.coupledDifferences(p)
	}
	if c.round1Bound > 0 {
		c.round1Difference(p)
	}
	if c.replayable {
		return c.residuals(ctx, p)
	}
	return nil
}

// sharedW0 compares a run's first checkpoint with the first run's.
func (c *checker) sharedW0(w []float32) {
	if c.w0 == nil {
		c.w0 = w
		return
	}
	if len(w) != len(c.w0) {
		c.w0Diff = math.Inf(1)
		return
	}
	for i := range w {
		c.w0Diff = math.Max(c.w0Diff, math.Abs(float64(w[i])-float64(c.w0[i])))
	}
}

// prepareRound1 sets the bound of the first round of the DP-FedAvg family and of dpsgd with
// one local step (round1Difference). DP-FedAvg: both
// worlds start from one w_0 and, in fedaudit's runs, share the clients sampled and the server's
// noise, so w_1 - w_1' is server_lr / (q m) times the difference of the target's clipped
// updates: at most its clip norm where C' lacks the client, twice it where a client or record
// differs. A deployment that skips the clipping passed every check (42 times the bound,
// measured, where clipped runs reach 1.000 of it).
func (c *checker) prepareRound1(ctx context.Context, cfg *spec.Config, imported bool) error {
	const name = "round-1-difference"
	switch {
	case imported:
		c.skip(name, "runs trained elsewhere may not share the sampled clients and the server's noise between a pair's worlds, which the bound needs")
		return nil
	case c.cfg.Canaries != nil:
		c.skip(name, "the runs carry canaries (train.canaries), which differ between the runs of a pair")
		return nil
	case !slices.Contains(c.rounds, 0) || !slices.Contains(c.rounds, 1):
		c.skip(name, fmt.Sprintf("needs rounds 0 and 1 as checkpoints (the runs record %v)", c.rounds))
		return nil
	case c.cfg.Algorithm == algo.DPSGD && c.cfg.LocalSteps != 1:
		c.skip(name, fmt.Sprintf("dpsgd with %d local steps: after the first step the worlds' models differ, and so does every example's gradient", c.cfg.LocalSteps))
		return nil
	case c.cfg.Algorithm == algo.DPSGD:
		// One step from the shared w_0 on the sum of per-example clipped gradients: the
		// worlds differ in the target record's, each of norm at most V.
		c.round1Bound = 2 * c.cfg.LearningRateAt(0, 0) * c.cfg.ClipNorm
		c.round1What = "2 eta V (the target record's per-example clipped gradient in dpsgd's sum, in each world)"
		return nil
	}
	plan, err := c.cfg.Plan(ctx, cfg.Data.Clients)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	differ := 2.0 // a replaced client or record: two clipped updates
	if cfg.Adjacency.Kind == "remove-client" {
		differ = 1
	}
	lr := c.cfg.ServerLR
	if lr == 0 {
		lr = 1
	}
	c.round1Bound = lr / plan.Divisor[0] * differ * plan.Clip[0][cfg.Adjacency.Client]
	c.round1What = "server_lr / (q m) times the target's clip norm, twice it where a client or record is replaced (the clients sampled and the server's noise shared)"
	return nil
}

// round1Difference compares a pair's first-round difference with its bound (prepareRound1).
func (c *checker) round1Difference(p *pairRuns) {
	w0, w1 := p.runs[0].params[0], p.runs[0].params[1]
	v0, v1 := p.runs[1].params[0], p.runs[1].params[1]
	if w0 == nil || w1 == nil || v0 == nil || v1 == nil {
		return
	}
	var diff float64
	for j := range w1 {
		d := (float64(w1[j]) - float64(w0[j])) - (float64(v1[j]) - float64(v0[j]))
		diff += d * d
	}
	ratio := math.Sqrt(diff) / (c.round1Bound + floatSlack*(norm(w1)+norm(v1)+norm(w0)+norm(v0)))
	c.round1N++
	if ratio > c.round1Ratio || c.round1At == "" {
		c.round1Ratio, c.round1At = ratio, fmt.Sprintf("pair %d", p.id)
	}
}

// participation adds the participation check where the deployment samples clients and the runs
// record rounds 0 and 1, over every pair of the directory.
func (c *checker) participation(ctx context.Context, cfg *spec.Config, path string) error {
	q, source, ok, err := declaredRate(ctx, cfg)
	if err != nil {
		return fmt.Errorf("check: participation: %w", err)
	}
	if !ok {
		return nil // every client in every round: nothing to count
	}
	if !slices.Contains(c.rounds, 0) || !slices.Contains(c.rounds, 1) {
		c.skip("participation", fmt.Sprintf("needs rounds 0 and 1 as checkpoints (the runs record %v)", c.rounds))
		return nil
	}
	// The worlds differ after round 1 when the target took part only if its differing sample
	// entered a step of it: with minibatches it may not, so fewer pairs differ than take part
	// (fixed batches of 2 of 10 samples: no pair of 40 differed where 20 took part), and a
	// correct deployment failed the check.
	if !cfg.Adjacency.ClientLevel() && cfg.Train.Batching != algo.Full {
		c.skip("participation", fmt.Sprintf("batching %s: the worlds differ after round 1 only when the target sample is in one of its minibatches, so the count of differing pairs is not the participation rate (full batches, or client-level adjacency, make it so)", cfg.Train.Batching))
		return nil
	}
	r, err := participationCheck(ctx, path, q, source)
	if err != nil || r == nil {
		return err
	}
	c.extra = append(c.extra, *r)
	return nil
}
