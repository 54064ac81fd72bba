package spec

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/fedaudit/fedaudit/attacks/canife"
	"github.com/fedaudit/fedaudit/attacks/hostmodel"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/train"
)

// Data is everything an experiment trains and attacks on, rebuilt deterministically from the
// config (so run files need not carry the data, only its hash).
type Data struct {
	// Pair holds the clients of C and of C' and both target samples.
	Pair *datasets.AdjacentPair
	// Test is the held-out test set (nil without one).
	Test *datasets.Dataset
	// Target tells the trainer which sample differs.
	Target train.TargetInfo
	// Hash is the content hash of both worlds (datasets.AdjacentPair.Hash).
	Hash string
	// Shape and Classes describe one sample.
	Shape   []int
	Classes int
	// Initial is the pretrained w_0 the canife canary was crafted at (train.pretrain with
	// adjacency.canary canife; nil otherwise): the trainer starts every pair from it rather
	// than pretraining again, on whatever backend, to a w_0 only within float rounding of it.
	Initial []float32
}

// Prepare loads the source, holds out the test set and the canary pool, splits the rest into
// clients and builds C' from C. Every random choice derives from the master seed.
//
// The model is checked against the data's shape and classes here, and a given audit.smoothness
// against the model's certified constant on the data (CheckSmoothness), so every entry point
// (run, train, plan, import) refuses a config the data decides is wrong before it writes or
// trains anything.
func Prepare(cfg *Config) (*Data, error) { return PrepareContext(context.Background(), cfg) }

// PrepareContext is Prepare under ctx: crafting a canife canary (and the pretraining before it)
// can take minutes, and a cancelled ctx (Ctrl-C, a cluster's SIGTERM at its time limit) ends it
// with ctx's error.
func PrepareContext(ctx context.Context, cfg *Config) (*Data, error) {
	data, err := prepare(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := CheckSmoothness(cfg, data); err != nil {
		return nil, err
	}
	return data, nil
}

// prepare builds the data of PrepareContext, before the checks that need all of it.
func prepare(ctx context.Context, cfg *Config) (*Data, error) {
	base, err := openSource(cfg)
	var pe *fs.PathError
	switch {
	case err != nil && errors.As(err, &pe) && !errors.Is(err, fs.ErrNotExist):
		// A file there that cannot be read (permission, an I/O error of a shared file system):
		// a failure (exit 1) a retry may clear, not the config's.
		return nil, err
	case err != nil:
		// The config names data that cannot be had (an unknown name, a missing file, a file of
		// another format, images it cannot make): exit status 2, and a command that created
		// its directory for this leaves none behind.
		return nil, &ConfigError{Err: err}
	}
	// Before anything is built from the data: a canife canary is crafted with the model.
	if err := cfg.Train.CheckModel(base.Shape, base.Classes); err != nil {
		return nil, &ConfigError{Err: fmt.Errorf("train: %w", err)}
	}
	// One seeded permutation decides which samples are test, canary pool and client data, so
	// the three never overlap.
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6461746173706c74)) // "dataspl t"
	perm := rng.Perm(base.Len())
	if cfg.Data.Limit > 0 && cfg.Data.Limit < len(perm) {
		perm = perm[:cfg.Data.Limit]
	}
	need := cfg.Data.TestSamples + canaryPool + cfg.Data.Clients*cfg.Data.PerClient
	if len(perm) < need {
		return nil, &ConfigError{Err: fmt.Errorf("data %s: %d samples, need %d (%d test + %d canary pool + %d clients x %d)",
			cfg.Data.Source, len(perm), need, cfg.Data.TestSamples, canaryPool, cfg.Data.Clients, cfg.Data.PerClient)}
	}
	nt := cfg.Data.TestSamples
	var test *datasets.Dataset
	if nt > 0 {
		test = base.Subset(base.Name+"/test", perm[:nt])
	}
	pool := base.Subset(base.Name+"/canary-pool", perm[nt:nt+canaryPool])
	rest := base.Subset(base.Name+"/train", perm[nt+canaryPool:])

	var clients []*datasets.Dataset
	switch cfg.Data.Split {
	case "iid":
		clients, err = datasets.SplitIID(rest, cfg.Data.Clients, cfg.Data.PerClient, cfg.Seed)
	case "dirichlet":
		clients, err = datasets.SplitDirichlet(rest, cfg.Data.Clients, cfg.Data.PerClient, cfg.Data.DirichletAlpha, cfg.Seed)
	}
	if err != nil {
		return nil, &ConfigError{Err: fmt.Errorf("split %s: %w", cfg.Data.Source, err)}
	}

	adj := cfg.Adjacency
	if adj.ClientLevel() {
		return prepareClientLevel(cfg, base, pool, test, clients)
	}
	target := clients[adj.Client].Sample(adj.Index)
	spec := datasets.CanarySpec{
		Kind:    datasets.CanaryKind(adj.Canary),
		Shape:   base.Shape,
		Classes: base.Classes,
		Pool:    pool,
		Target:  target,
		Pixels:  adj.Pixels,
		Seed:    cfg.Seed,
	}
	if adj.Canary == "custom" {
		spec.Target = datasets.Sample{Features: adj.Features, Label: adj.Label}
	}
	var canary datasets.Sample
	var initial []float32
	switch {
	case adj.Kind == "remove" || adj.Kind == "gradient":
		// No canary enters these worlds: building one could only fail (a pattern on flat
		// data), for a sample nobody uses.
	case adj.Canary == CanaryCANIFE:
		canary, initial, err = craftCanary(ctx, cfg, clients, base)
	default:
		canary, err = datasets.BuildCanary(spec)
	}
	if err != nil && adj.Canary == CanaryCANIFE {
		return nil, fmt.Errorf("adjacency.canary: %w", err) // crafting trains: it can fail or be stopped
	}
	if err != nil {
		return nil, &ConfigError{Err: fmt.Errorf("adjacency.canary: %w", err)}
	}
	var kind datasets.AdjacencyKind
	switch adj.Kind {
	case "replace":
		kind = datasets.Replace
	case "add":
		kind = datasets.Add
	case "remove":
		kind = datasets.Remove
		canary = datasets.Sample{}
	case "gradient":
		// The worlds hold the same data: C' differs in the target's gradient alone, which
		// the engine crafts (train.Config.GradientCanary).
		kind, canary = datasets.Replace, target
	}
	pair, err := datasets.NewAdjacentPair(clients, adj.Client, adj.Index, kind, canary)
	if err != nil {
		return nil, &ConfigError{Err: fmt.Errorf("adjacency: %w", err)}
	}
	return &Data{
		Pair:    pair,
		Test:    test,
		Target:  train.TargetInfo{Client: adj.Client, Index: adj.Index},
		Hash:    pair.Hash(),
		Shape:   base.Shape,
		Classes: base.Classes,
		Initial: initial,
	}, nil
}

// prepareClientLevel builds the client-level adjacent pair: client adjacency.client of C is
// replaced by a canary client (replace-client) or removed (remove-client).
func prepareClientLevel(cfg *Config, base, pool, test *datasets.Dataset, clients []*datasets.Dataset) (*Data, error) {
	adj := cfg.Adjacency
	var canary *datasets.Dataset
	if adj.Kind == "replace-client" {
		own := clients[adj.Client]
		spec := datasets.CanarySpec{Kind: datasets.CanaryKind(adj.Canary), Shape: base.Shape, Classes: base.Classes,
			Pool: pool, Target: own.Sample(adj.Index), Pixels: adj.Pixels, Seed: cfg.Seed}
		if adj.Canary == "custom" {
			spec.Target = datasets.Sample{Features: adj.Features, Label: adj.Label}
		}
		var sample datasets.Sample
		if adj.Canary != "relabel" {
			s, err := datasets.BuildCanary(spec)
			if err != nil {
				return nil, &ConfigError{Err: fmt.Errorf("adjacency.canary: %w", err)}
			}
			sample = s
		}
		c, err := datasets.CanaryClient(own, datasets.CanaryKind(adj.Canary), sample)
		if err != nil {
			return nil, &ConfigError{Err: fmt.Errorf("adjacency.canary: %w", err)}
		}
		canary = c
	}
	pair, err := datasets.NewClientPair(clients, adj.Client, adj.Index, datasets.AdjacencyKind(adj.Kind), canary)
	if err != nil {
		return nil, &ConfigError{Err: fmt.Errorf("adjacency: %w", err)}
	}
	return &Data{
		Pair:    pair,
		Test:    test,
		Target:  train.TargetInfo{Client: adj.Client, Index: adj.Index, WholeClient: true, Absent: adj.Kind == "remove-client"},
		Hash:    pair.Hash(),
		Shape:   base.Shape,
		Classes: base.Classes,
	}, nil
}

func openSource(cfg *Config) (*datasets.Dataset, error) {
	if cfg.Data.Source == "synthetic-images" && cfg.Data.Images != nil {
		need := cfg.Data.Clients*cfg.Data.PerClient + cfg.Data.TestSamples + canaryPool
		d, err := datasets.SyntheticImages(cfg.Data.Images.config(cfg.Seed, need))
		if err != nil {
			return nil, fmt.Errorf("data.images: %w", err)
		}
		return d, nil
	}
	if cfg.Data.Source != "synthetic" {
		d, err := datasets.Open(cfg.Data.Source, cfg.Data.DataDir)
		if err != nil {
			return nil, fmt.Errorf("data.source: %w", err)
		}
		return d, nil
	}
	s := cfg.Data.Synthetic
	d, err := datasets.Synthetic(datasets.SyntheticConfig{
		Name:       "synthetic",
		N:          s.Samples,
		Shape:      []int{s.Dim},
		Classes:    s.Classes,
		Separation: s.Separation,
		Noise:      s.Noise,
		Seed:       cfg.Seed,
	})
	if err != nil {
		return nil, fmt.Errorf("data.synthetic: %w", err)
	}
	return d, nil
}

// PrepareNote says what Prepare will compute beyond reading and splitting the data, for a
// progress line before it: crafting a canife canary, after pretraining w_0 where the config
// asks for it; "" when there is nothing of the kind.
func (c *Config) PrepareNote() string {
	if c.Adjacency.Canary != CanaryCANIFE {
		return ""
	}
	if p := c.Train.Pretrain; p != nil {
		return fmt.Sprintf("data: crafting the canife canary at the pretrained w_0 (%d rounds of pretraining on the CPU first)", p.Rounds)
	}
	return "data: crafting the canife canary at the seeded w_0"
}

// CanaryCANIFE is the canary kind "canife": an input crafted so that its gradient at the w_0
// the training starts from lies out of the span of the shared data's gradients (package
// attacks/canife, after Maddock et al., ICLR 2023).
const CanaryCANIFE = "canife"

// craftCanary crafts the "canife" canary for sample-level adjacency: at the pairs' w_0 (the
// seeded initialization, or the pretrained one of train.pretrain), against the data both
// worlds hold, with a label drawn from the master seed and every feature within the range of
// the clients' features. It also returns that w_0 when it is pretrained (nil when seeded).
func craftCanary(ctx context.Context, cfg *Config, clients []*datasets.Dataset, base *datasets.Dataset) (datasets.Sample, []float32, error) {
	// The stages of one command each prepare the data: craft once per config and process (a
	// CNN's crafting takes seconds).
	key := string(cfg.JSON())
	crafted.Lock()
	defer crafted.Unlock()
	if c, ok := crafted.canaries[key]; ok {
		return c.sample.Clone(), c.initial, nil
	}
	s, w0, err := craft(ctx, cfg, clients, base)
	if err != nil {
		return datasets.Sample{}, nil, err
	}
	if crafted.canaries == nil {
		crafted.canaries = map[string]craftedCanary{}
	}
	crafted.canaries[key] = craftedCanary{s, w0}
	return s.Clone(), w0, nil
}

// crafted holds the canife canaries crafted in this process, by config.
var crafted struct {
	sync.Mutex
	canaries map[string]craftedCanary
}

// craftedCanary is a crafted canary and the pretrained w_0 it was crafted at (nil: seeded);
// the w_0 is shared, never written.
type craftedCanary struct {
	sample  datasets.Sample
	initial []float32
}

// craft is craftCanary's work, without the memo. Prepare takes no context, so a pretraining
// here runs to its end once started (LeNet-5, 50 rounds: about 25 s on two cores).
func craft(ctx context.Context, cfg *Config, clients []*datasets.Dataset, base *datasets.Dataset) (datasets.Sample, []float32, error) {
	adj := cfg.Adjacency
	job := train.Job{Config: cfg.Train, WorldC: clients, WorldCPrime: clients, Target: train.TargetInfo{Client: adj.Client, Index: adj.Index}}
	if adj.Client < 0 || adj.Client >= len(clients) || adj.Index < 0 || adj.Index >= clients[adj.Client].Len() {
		return datasets.Sample{}, nil, fmt.Errorf("canife: target sample %d of client %d does not exist", adj.Index, adj.Client)
	}
	if adj.Kind == "add" {
		// C' holds one sample more than C and all of C is shared (train.SharedClients reads
		// that from the worlds' sizes, whatever the added sample is).
		pair, err := datasets.NewAdjacentPair(clients, adj.Client, adj.Index, datasets.Add, clients[adj.Client].Sample(0))
		if err != nil {
			return datasets.Sample{}, nil, fmt.Errorf("canife: %w", err)
		}
		job.WorldCPrime = pair.CPrime
	}
	m, err := hostmodel.New(cfg.Train.Model, base.Shape, base.Dim(), base.Classes)
	if err != nil {
		return datasets.Sample{}, nil, fmt.Errorf("canife: %w", err)
	}
	w32, err := train.InitialParams(ctx, job)
	if err != nil {
		return datasets.Sample{}, nil, fmt.Errorf("canife: %w", err)
	}
	w := make([]float64, len(w32))
	for i, v := range w32 {
		w[i] = float64(v)
	}
	var pool []datasets.Sample
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range train.SharedClients(job) {
		for i := 0; i < c.Len(); i++ {
			pool = append(pool, c.Sample(i))
		}
		for _, v := range c.Features {
			lo, hi = min(lo, float64(v)), max(hi, float64(v))
		}
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x63616e696665)) // "canife"
	label := rng.IntN(base.Classes)
	res, err := canife.Craft(ctx, m, w, pool, label, lo, hi, canife.Config{}, rng)
	if err != nil {
		return datasets.Sample{}, nil, err
	}
	x := make([]float32, len(res.Features))
	for i, v := range res.Features {
		x[i] = float32(v)
	}
	if cfg.Train.Pretrain == nil {
		w32 = nil // the seeded w_0: every trainer draws the same one from the master seed
	}
	return datasets.Sample{Features: x, Label: int32(label)}, w32, nil
}
