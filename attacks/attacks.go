// Package attacks turns recorded training runs into scores: for each run at a checkpoint T and
// under a threat model, one number that is higher the more an attack believes the run trained on
// world C rather than the adjacent world C'. audit/ thresholds these scores into empirical
// trade-off curves and lower bounds on mu.
//
// Attacks read run files through runs.Table and write score files through runs.CreateScores.
// Three observers are modelled (runs.ThreatFinal, runs.ThreatAllIterates, runs.ThreatUploads):
// the final model only, every global model, and the target client's uploads as the server sees
// them. Each attack declares what it needs (parameters, uploads, recorded statistics, the target
// samples, the model) and Score refuses with a message naming what a run file lacks.
//
// Attacks that learn from runs (LiRA, the linear distinguisher) are fitted on shadow pairs (every
// fifth pair, at most 500) that are then never scored, so the scores they give the other pairs
// are independent draws of one fixed test, as the certification assumes. Scores do not depend on
// the number of workers.
//
// The models' host-side mathematics (the float64 evaluation of train's models and nn's CNNs,
// certified smoothness and the Hessian estimate) lives in attacks/hostmodel; the reconstruction
// of a client's input from its update (analytic inversion, Inverting Gradients) and the image
// metrics in attacks/inversion. The attacks here wrap them.
//
// docs/attacks.md describes every attack, its threat model, score direction and metrics.
package attacks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/fedaudit/fedaudit/attacks/hostmodel"
	"github.com/fedaudit/fedaudit/attacks/inversion"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train"
)

// Env is what an attack knows besides the run file: the experiment and the target. The caller
// fills it from the experiment config and the datasets.
type Env struct {
	// Meta is the run file's metadata (Table.Meta()).
	Meta runs.Meta
	// Config is the training config the runs were made with. Model, LocalSteps, the learning-rate
	// schedule and Batching are used by attacks that model local training.
	Config train.Config
	// Dim and Classes are the dataset's input dimension and number of classes.
	Dim, Classes int
	// Shape is the shape of one input (e.g. [1 28 28]); optional, for reports and invgrad's TV prior.
	Shape []int
	// Target is epsilon, the target sample as in C; TargetPrime is epsilon', as in C'. A
	// TargetPrime that is not Present means C' lacks the sample (removal adjacency).
	Target, TargetPrime datasets.Sample
	// TargetClient is the client holding the target sample.
	TargetClient int
	// ClientSize is the target client's number of samples.
	ClientSize int
	// ClientLabels are the labels of the target client's samples in world C (the target's
	// included), for label-reconstruction accuracy; optional when ClientSize is 1.
	ClientLabels []int32
	// Aux are public samples from the data distribution (e.g. part of the test set) the label
	// count estimator uses to estimate the client's mean prediction; optional.
	Aux []datasets.Sample
	// Initial is w_0, public in federated learning (train draws it from the master seed);
	// optional: without it attacks that need w_0 read the round-0 checkpoint.
	Initial []float32
	// ShadowEvery makes every k-th pair (in order of pair id) a shadow pair, on which learned
	// attacks are fitted and which they never score; 0 means DefaultShadowEvery (5).
	// ShadowMax caps the shadow pairs; 0 means DefaultShadowMax (500).
	ShadowEvery, ShadowMax int
	// Seed seeds the attacks' own randomness (random directions, restarts).
	Seed uint64

	model   *hostmodel.Model
	cache   *envCache
	invgrad inversion.Config // Options' invgrad budget
	// ctx is Score's: an observation that runs for long (a reconstruction) stops when it is
	// done, where the runner only stops handing out work.
	ctx context.Context
}

// context is the context of the Score call the environment serves, or Background.
func (e *Env) context() context.Context {
	if e.ctx == nil {
		return context.Background()
	}
	return e.ctx
}

// envCache holds what attacks compute once per Score call and share between runs.
type envCache struct {
	once sync.Once
	dirs [][]float64

	gradOnce sync.Once
	gradDir  []float32
}

// directed is a crafted canary with a public unit direction (canary.Gradient, canary.Update).
type directed interface {
	Vector(seed uint64, d int) []float32
}

// canaryDirection is the crafted canary's direction for parameter vectors of length d,
// computed once.
func (c *envCache) canaryDirection(v directed, seed uint64, d int) []float32 {
	c.gradOnce.Do(func() { c.gradDir = v.Vector(seed, d) })
	return c.gradDir
}

func (c *envCache) directions(seed uint64, d int) [][]float64 {
	c.once.Do(func() { c.dirs = randomDirections(seed, linearRandomDirections, d) })
	return c.dirs
}

// Needs is what an attack requires.
type Needs struct {
	Params  bool     // global parameters w_T
	Initial bool     // w_0 (Env.Initial or the round-0 checkpoint)
	Upload  bool     // the target client's upload in round T-1 and w_{T-1}
	Stats   []string // recorded statistic columns
	Target  bool     // Env.Target (and Env.TargetPrime where present)
	Model   bool     // a host model of Env.Config.Model
	Classes bool     // a model ending in a softmax over classes (softmax, mlp or a CNN)
	// LastDense is a model whose last layer is dense (label reconstruction reads its update);
	// FirstDense one whose first layer is dense on the raw input (analytic inversion).
	LastDense, FirstDense bool
}

// Info describes an attack.
type Info struct {
	Name   string
	Threat string // runs.ThreatFinal, runs.ThreatAllIterates or runs.ThreatUploads
	Needs  Needs
	// Learned attacks are fitted on the shadow pairs and score only the others.
	Learned bool
	// Metrics names the per-run success metrics the attack reports beside its score.
	Metrics []string
	// Summary says in one line what the attack does.
	Summary string
	// Window marks an all-iterates attack that looks at the last round only (w_{T-1} and w_T),
	// not at every iterate: its bound at T says what that window shows, so the analysis does
	// not carry earlier checkpoints' bounds into its rows.
	Window bool
	// ByName says why the attack runs only when asked for by name, or "" for an attack of the
	// default set: an attack that orders runs like another default attack in most audits would
	// repeat that attack's row and cost every row of the family confidence (Bonferroni).
	ByName string
}

// Window reports whether the named attack looks at a window of the last rounds only (Info.Window).
func Window(name string) bool {
	a, err := Lookup(name)
	return err == nil && a.Info().Window
}

// Observation is one run at checkpoint Round: the row at that round and, where an attack needs
// them, the rows at round Round-1 and 0.
type Observation struct {
	RunID, PairID int64
	World         int8
	Round         int32
	Row           runs.Row
	Prev          *runs.Row // round Round-1
	Initial       *runs.Row // round 0
}

// Observed is what an attack makes of one observation: a pointwise attack's score and metrics, or
// a learned attack's features.
type Observed struct {
	Score    float64
	Metrics  []float64
	Features []float64
	// Reconstruction is a reconstructing attack's estimate of the sample (in Env.Shape's
	// layout), for the gallery.
	Reconstruction []float64
}

// errMissing marks an observation that lacks what the attack looks at although the file has the
// column, e.g. a round in which the target client did not take part. Such a run gets score 0:
// the absence carries no information about the world, since both runs of a pair share their
// participation draws.
var errMissing = errors.New("observation missing")

// errFewShadowRuns marks a learned attack's fit that had fewer than two usable shadow runs of a
// world at one round: the target client sat out the round in most shadow pairs (upload-lda
// under client sampling), or their runs diverged. The scoring stage then scores that round's
// runs as missing (0, a constant test that certifies nothing) rather than fail every attack.
var errFewShadowRuns = errors.New("too few shadow runs")

// Attack is one attack.
type Attack interface {
	Info() Info
	// Observe reduces one observation to a score and metrics or to features.
	Observe(env *Env, obs *Observation) (Observed, error)
}

// Example is a learned attack's training example.
type Example struct {
	RunID, PairID int64
	World         int8
	Features      []float64
}

// Learner is an attack fitted on runs. Fit sees only the shadow pairs, which it never scores.
type Learner interface {
	Attack
	Fit(env *Env, train []Example) (func(features []float64) float64, error)
}

var registry = []Attack{
	informedAttack{name: "informed-all", stat: runs.StatLLRAll, threat: runs.ThreatAllIterates,
		summary: "the informed adversary's Gaussian log-likelihood ratio summed over all rounds (recorded by training)"},
	informedAttack{name: "informed-last", stat: runs.StatLLRLast, threat: runs.ThreatAllIterates, window: true,
		summary: "the informed adversary's log-likelihood ratio of the last round only: an observer of w_{T-1} and w_T"},
	informedAttack{name: "informed-diff", stat: runs.StatLLRDiff, threat: runs.ThreatAllIterates,
		summary: "the informed adversary's ratio of the noise residuals differenced over consecutive rounds (replayed from imported iterates): catches noise reused across rounds"},
	informedUploadAttack{},
	lossAttack{},
	marginAttack{},
	liraAttack{online: false},
	liraAttack{online: true},
	gradAlignAttack{},
	linearAttack{},
	gradCanaryAttack{},
	labelAttack{},
	inversionAttack{},
	invgradAttack{},
	vectorAttack{name: "param-lda", threat: runs.ThreatFinal, of: finalParams,
		summary: "diagonal LDA on the final parameters w_T (any architecture), fitted on the shadow pairs' whole vectors"},
	vectorAttack{name: "param-cosine", threat: runs.ThreatFinal, of: finalMove, cosine: true,
		summary: "one-shot cosine statistic: cos(w_T - w_0, d), d the shadow pairs' mean difference between the worlds (any architecture)"},
	vectorAttack{name: "upload-lda", threat: runs.ThreatUploads, of: uploadUpdate,
		summary: "diagonal LDA on the target client's update U - w_{T-1} (any architecture), fitted on the shadow pairs' whole vectors"},
}

// Names lists the available attacks in their canonical order.
func Names() []Info {
	out := make([]Info, len(registry))
	for i, a := range registry {
		out[i] = a.Info()
	}
	return out
}

// Lookup returns the attack of a name.
func Lookup(name string) (Attack, error) {
	for _, a := range registry {
		if a.Info().Name == name {
			return a, nil
		}
	}
	names := make([]string, len(registry))
	for i, a := range registry {
		names[i] = a.Info().Name
	}
	return nil, fmt.Errorf("unknown attack %q (have %v)", name, names)
}

// Default returns the attacks a run file supports by its columns alone, in canonical order.
// Attacks needing the target samples or the model are included; Score checks those against the
// Env.
func Default(meta runs.Meta) []string {
	var out []string
	for _, a := range registry {
		info := a.Info()
		if info.ByName == "" && fileLacks(info.Needs, meta) == "" {
			out = append(out, info.Name)
		}
	}
	return out
}

// fileLacks says what of n a run file with meta lacks, or "" when nothing.
func fileLacks(n Needs, meta runs.Meta) string {
	var missing []string
	if (n.Params || n.Upload) && !meta.HasParams {
		missing = append(missing, "global parameters (column \"params\": record_params)")
	}
	if n.Upload && !meta.HasUpload {
		missing = append(missing, "the target client's uploads (column \"upload\": record_upload)")
	}
	for _, s := range n.Stats {
		if meta.StatIndex(s) < 0 {
			missing = append(missing, fmt.Sprintf("statistic column %q", s))
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("the run file lacks %v", joinAnd(missing))
}

func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	out := ""
	for i, v := range s {
		switch {
		case i == 0:
		case i == len(s)-1:
			out += " and "
		default:
			out += ", "
		}
		out += v
	}
	return out
}

// check reports why the attack cannot run on the file and env.
func check(a Attack, env *Env) error {
	info := a.Info()
	n := info.Needs
	if why := fileLacks(n, env.Meta); why != "" {
		return fmt.Errorf("attack %s: %s", info.Name, why)
	}
	if n.Target && !env.Target.Present() {
		return fmt.Errorf("attack %s: needs the target sample epsilon (Env.Target)", info.Name)
	}
	if n.Model || n.Classes {
		if env.model == nil {
			m, err := hostmodel.New(env.Config.Model, env.Shape, env.Dim, env.Classes)
			if err != nil {
				return fmt.Errorf("attack %s: %w", info.Name, err)
			}
			env.model = m
		}
		if n.Classes && !env.model.HasClasses() {
			return fmt.Errorf("attack %s: needs a model with a softmax over classes, not %q", info.Name, env.Config.Model.Kind)
		}
		if _, _, _, ok := env.model.LastDense(); n.LastDense && !ok {
			return fmt.Errorf("attack %s: %s", info.Name, whyNotLastDense)
		}
		if _, _, _, _, ok := env.model.FirstLayer(); n.FirstDense && !ok {
			return fmt.Errorf("attack %s: %s", info.Name, whyNotFirstDense)
		}
		if n.Target {
			for _, s := range []datasets.Sample{env.Target, env.TargetPrime} {
				if s.Present() && len(s.Features) != env.Dim {
					return fmt.Errorf("attack %s: target sample has %d features, the model takes %d", info.Name, len(s.Features), env.Dim)
				}
				if s.Present() && env.model.HasClasses() && (s.Label < 0 || int(s.Label) >= env.Classes) {
					return fmt.Errorf("attack %s: target label %d outside 0..%d", info.Name, s.Label, env.Classes-1)
				}
			}
		}
	}
	if n.Initial && env.Initial != nil && env.model != nil && len(env.Initial) != env.model.NumParams() {
		return fmt.Errorf("attack %s: Env.Initial has %d parameters, the model %d", info.Name, len(env.Initial), env.model.NumParams())
	}
	return nil
}

// stat returns the named statistic of a row; the name was checked against the file.
func stat(env *Env, row *runs.Row, name string) float64 {
	return row.Stats[env.Meta.StatIndex(name)]
}

// metricNames is the union of the metrics of attacks, in order of first appearance.
func metricNames(atts []Attack) []string {
	var out []string
	for _, a := range atts {
		for _, m := range a.Info().Metrics {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}
