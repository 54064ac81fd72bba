package spec

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/theory"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/canary"
)

// Config describes one experiment: data, adjacency, training, and how to audit.
type Config struct {
	// Name labels reports.
	Name string `json:"name" yaml:"name"`
	// Seed is the master seed: the data split, the canary and every run derive from it.
	Seed uint64 `json:"seed" yaml:"seed"`
	// Pairs is the number of coupled pairs (each trains once on C and once on C').
	Pairs int `json:"pairs" yaml:"pairs"`
	// Data says where the samples come from and how they are split into clients.
	Data DataConfig `json:"data" yaml:"data"`
	// Adjacency says how C' differs from C.
	Adjacency AdjacencyConfig `json:"adjacency" yaml:"adjacency"`
	// Train is the training configuration; its seed is the master seed.
	Train train.Config `json:"train" yaml:"train"`
	// Audit says how scores become bounds and what is claimed.
	Audit AuditConfig `json:"audit" yaml:"audit"`
}

// DataConfig selects the data and its federated split.
type DataConfig struct {
	// Source is "synthetic", a dataset name such as "fashion-mnist" or "fashion-mnist:train",
	// or a path (see datasets.Open).
	Source string `json:"source" yaml:"source"`
	// DataDir is searched for named datasets before the system locations.
	DataDir string `json:"data_dir,omitempty" yaml:"data_dir,omitempty"`
	// Synthetic shapes the synthetic source.
	Synthetic SyntheticConfig `json:"synthetic,omitempty" yaml:"synthetic,omitempty"`
	// Images shapes the synthetic-images source (class prototypes plus pixel noise in
	// [0, 1]); without it, 1000 grey 28x28 images in 10 classes.
	Images *SyntheticImagesConfig `json:"images,omitempty" yaml:"images,omitempty"`
	// Clients is m.
	Clients int `json:"clients" yaml:"clients"`
	// PerClient is the number of samples of every client.
	PerClient int `json:"per_client" yaml:"per_client"`
	// Split is "iid" or "dirichlet".
	Split string `json:"split" yaml:"split"`
	// DirichletAlpha is the concentration of the label-skew split (the paper uses 0.1).
	DirichletAlpha float64 `json:"dirichlet_alpha,omitempty" yaml:"dirichlet_alpha,omitempty"`
	// TestSamples are held out of the source for test accuracy; 0 records no accuracy.
	TestSamples int `json:"test_samples" yaml:"test_samples"`
	// Limit keeps only the first Limit samples of the source after the seeded shuffle (0: all),
	// so a large dataset can be audited quickly.
	Limit int `json:"limit,omitempty" yaml:"limit,omitempty"`
}

// SyntheticImagesConfig shapes the synthetic-images source; zero fields take the defaults of
// datasets.DefaultSyntheticImageConfig (samples: as many as the split needs).
type SyntheticImagesConfig struct {
	Samples  int     `json:"samples,omitempty" yaml:"samples,omitempty"`
	Classes  int     `json:"classes,omitempty" yaml:"classes,omitempty"`
	Channels int     `json:"channels,omitempty" yaml:"channels,omitempty"`
	Height   int     `json:"height,omitempty" yaml:"height,omitempty"`
	Width    int     `json:"width,omitempty" yaml:"width,omitempty"`
	Noise    float64 `json:"noise,omitempty" yaml:"noise,omitempty"`
}

// config is the datasets configuration it describes, seeded by the experiment's seed.
func (s *SyntheticImagesConfig) config(seed uint64, need int) datasets.SyntheticImageConfig {
	c := datasets.DefaultSyntheticImageConfig()
	c.Seed = seed
	c.N = max(need, c.N)
	for _, f := range []struct {
		dst *int
		v   int
	}{{&c.N, s.Samples}, {&c.Classes, s.Classes}, {&c.Channels, s.Channels}, {&c.Height, s.Height}, {&c.Width, s.Width}} {
		if f.v != 0 {
			*f.dst = f.v
		}
	}
	if s.Noise != 0 {
		c.Noise = s.Noise
	}
	return c
}

// SyntheticConfig shapes the class-conditional Gaussian source.
type SyntheticConfig struct {
	Samples    int     `json:"samples" yaml:"samples"`
	Dim        int     `json:"dim" yaml:"dim"`
	Classes    int     `json:"classes" yaml:"classes"`
	Separation float64 `json:"separation" yaml:"separation"`
	Noise      float64 `json:"noise" yaml:"noise"`
}

// AdjacencyConfig says how C' differs from C: sample Index of client Client is replaced by,
// or C' gains or loses, the canary; or (client-level) the whole client is replaced by a canary
// client or removed.
type AdjacencyConfig struct {
	// Kind is "replace" (default), "add" or "remove" (sample-level), "replace-client" (C' holds
	// a canary client of as many samples in place of client Client: "relabel" relabels all its
	// samples, the other canaries repeat the canary sample) or "remove-client" (C' lacks the
	// client; only the DP-FedAvg family, whose noise is the server's, supports it). Index
	// then only picks the sample whose loss and margin are recorded and which the attacks that
	// read the target sample look at (before 2026-11-28 those read the client's first sample).
	Kind string `json:"kind" yaml:"kind"`
	// Client and Index locate the differing sample.
	Client int `json:"client" yaml:"client"`
	Index  int `json:"index" yaml:"index"`
	// Canary builds epsilon': "dirac" (blank input with a few saturated features, default),
	// "relabel" (the same sample with another label), "heldout" (a sample no client holds),
	// for images "pattern" (a checkerboard, out of distribution) or "blank" (a black image with
	// the rarest label), "canife" (an input crafted so that its gradient at w_0 leaves the span
	// of the shared data's gradients; sample-level replace or add, models with a softmax), or
	// "custom" (Features and Label below).
	Canary string `json:"canary" yaml:"canary"`
	// Pixels is the number of saturated features of a dirac canary (0: the builder's default).
	Pixels int `json:"pixels,omitempty" yaml:"pixels,omitempty"`
	// Features and Label give a custom canary.
	Features []float32 `json:"features,omitempty" yaml:"features,omitempty"`
	Label    int32     `json:"label,omitempty" yaml:"label,omitempty"`
	// Gradient is the crafted gradient of kind "gradient": C' is C with sample Index of client
	// Client's gradient gaining Gradient.Norm u in every local step that uses it
	// (canary.Gradient; fedavg and fedprox). The data of the two worlds is the same, so the
	// canary field is not used; the config's train.gradient_canary is set from it.
	Gradient *canary.Gradient `json:"gradient,omitempty" yaml:"gradient,omitempty"`
	// CraftedUpdate, with kind "remove-client" (the DP-FedAvg family), makes client Client a
	// canary client whose update is crafted, not learned: in every round it is sampled it
	// sends clip_t u, u a fixed public unit direction (canary.Update), and its data is not
	// used. C holds it, C' lacks it. The config's train.crafted_update is set from it.
	CraftedUpdate *canary.Update `json:"crafted_update,omitempty" yaml:"crafted_update,omitempty"`
}

// DifferingWorld is the world that holds what makes the worlds differ: C' holds the canary
// (replace, add, replace-client), C the record or client that C' lacks (remove, remove-client).
// A manifest's canary column marks it, and the snapshot export writes it.
func (a AdjacencyConfig) DifferingWorld() int8 {
	if a.Kind == "remove" || a.Kind == "remove-client" {
		return runs.WorldC
	}
	return runs.WorldCPrime
}

// AuditConfig says how scores become bounds.
type AuditConfig struct {
	// Confidence of the certified lower bounds (default 0.95).
	Confidence float64 `json:"confidence" yaml:"confidence"`
	// Delta for epsilon bounds (default 1e-5).
	Delta float64 `json:"delta" yaml:"delta"`
	// Method chooses the threshold validly: "bonferroni", "split", "dkw", "band" (a
	// rank-grid band, tighter than DKW in the tails: docs/statistics.md) or "dkw+band" (both
	// at half the error level, the tighter bound kept at each threshold); empty picks dkw+band
	// for the coupled pairs fedaudit trains (their worlds share noise, which Bonferroni's
	// argument cannot allow) and bonferroni for independent scores. "one-run" audits only the
	// canaries the runs carry (train.canaries): one-run certified bounds from the world-C run
	// of every pair, beside the one-shot estimate; runs with canaries under another method get
	// those rows beside the coupled pairs' rows.
	Method string `json:"method" yaml:"method"`
	// Attacks to run; empty means every attack the run files support.
	Attacks []string `json:"attacks,omitempty" yaml:"attacks,omitempty"`
	// Rounds to attack; empty means every checkpoint but 0. Attacks on uploads at round T also
	// need the checkpoint T-1.
	Rounds []int `json:"rounds,omitempty" yaml:"rounds,omitempty"`
	// InvgradPairs caps the pairs the invgrad attack reconstructs at each round (the first by
	// pair id, both runs of each; the attack's audit rests on those alone): a reconstruction of
	// a LeNet-5 upload takes seconds. 0 means 8 for CNNs and every pair for the other models;
	// -1 means every pair.
	InvgradPairs int `json:"invgrad_pairs,omitempty" yaml:"invgrad_pairs,omitempty"`
	// InvgradIterations is invgrad's optimizer budget per restart (signed-Adam iterations); 0
	// means 400.
	InvgradIterations int `json:"invgrad_iterations,omitempty" yaml:"invgrad_iterations,omitempty"`
	// Smoothness is the constant L of the bound. For the quadratic model and softmax regression
	// it is computed from the data when zero (certified); for MLPs it is given here or, when zero
	// and the run files hold parameters (train.record_params), estimated by Hessian power
	// iteration at recorded checkpoints. Given and estimated values make every convergent bound
	// an estimate, and the report says so. It is one sample's loss's constant (that of a batch's
	// mean): under dpsgd, whose step descends the batch's sum, the bound uses B times it
	// (bounds.TheoryConfig).
	Smoothness float64 `json:"smoothness,omitempty" yaml:"smoothness,omitempty"`
	// ClaimSamplingRate is a deliberate mis-calibration for the DP-FedAvg family: the claim is
	// computed by the accountant as if clients were sampled with this rate, while training
	// uses train.sampling_rate. Zero means the rate used.
	ClaimSamplingRate float64 `json:"claim_sampling_rate,omitempty" yaml:"claim_sampling_rate,omitempty"`
	// ClaimMu, or ClaimEpsilon at Delta, is the deployment's claim: a finite number > 0
	// (ClaimRule; a stated 0 or infinity is refused). Left out, there is none: the theory's
	// bounds, or for the DP-FedAvg family the accountant's claim, are then checked.
	ClaimMu      float64 `json:"claim_mu,omitempty" yaml:"claim_mu,omitempty"`
	ClaimEpsilon float64 `json:"claim_epsilon,omitempty" yaml:"claim_epsilon,omitempty"`
	// ClaimDelta is the delta ClaimEpsilon is stated at, where it differs from Delta (the delta
	// of every certified eps_lower): 0 means Delta. `audit report --delta` and `audit run
	// --delta` record a new Delta in an experiment's config.json and keep the claim at the delta
	// it was made at here, since a claim of epsilon at another delta is another claim.
	ClaimDelta float64 `json:"claim_delta,omitempty" yaml:"claim_delta,omitempty"`
	// ClaimAbout names what the claim is about: "models" (the default) the global models the
	// server releases, judged on the final and all-iterates rows; "uploads" each upload of the
	// target client as the server receives it, judged on the uploads rows. Rows of the other
	// observer are judged against the theory's bound for what they see, as without a claim:
	// one upload carries the client's whole noise, the average only sigma/sqrt(n), so a claim
	// about the models says nothing of an upload.
	ClaimAbout string `json:"claim_about,omitempty" yaml:"claim_about,omitempty"`
	// SplitSeed drives the split method's random division of the scores into selection and
	// evaluation halves; 0 means the master seed. It is not the training seed: `audit run` and
	// `audit report` record a --seed given on the command line here, as they record the other
	// statistics settings, so that every later stage divides the scores the same way.
	SplitSeed uint64 `json:"split_seed,omitempty" yaml:"split_seed,omitempty"`
}

// ClaimRule is the one rule for a claimed mu or epsilon, in the config and on the command line:
// a claim of 0 (no privacy loss at all) or of infinity (no guarantee) is refused, never read as
// "no claim"; no claim is a claim left out.
const ClaimRule = "a claim must be a finite number > 0 (to judge no claim, leave it out)"

// What a claim is about (AuditConfig.ClaimAbout).
const (
	// ClaimAboutModels: the global models the server releases (final and all-iterates rows).
	ClaimAboutModels = "models"
	// ClaimAboutUploads: each upload of the target client as the server receives it.
	ClaimAboutUploads = "uploads"
)

// MethodOneRun is the audit.method of the one-run audits: the runs carry canaries
// (train.canaries) and every bound comes from them (audit.OneRunAnalyze), not from coupled
// pairs; the run-level attacks are not scored. Other methods audit the coupled pairs and, when
// the runs carry canaries, add the one-run rows beside them.
const MethodOneRun = "one-run"

// ValidClaim reports whether x is a claimed mu or epsilon that ClaimRule allows.
func ValidClaim(x float64) bool { return x > 0 && !math.IsInf(x, 0) }

// statedZeros reads the fields whose stated 0 a config must refuse, whatever their value: a
// float left out and a float of 0 decode alike, and a claim of 0 must be refused, not read as no
// claim, as must a synthetic source's separation or noise of 0, not read as the default.
type statedZeros struct {
	Audit struct {
		ClaimMu      *float64 `json:"claim_mu" yaml:"claim_mu"`
		ClaimEpsilon *float64 `json:"claim_epsilon" yaml:"claim_epsilon"`
	} `json:"audit" yaml:"audit"`
	Data struct {
		Source    string `json:"source" yaml:"source"`
		Synthetic struct {
			Separation *float64 `json:"separation" yaml:"separation"`
			Noise      *float64 `json:"noise" yaml:"noise"`
		} `json:"synthetic" yaml:"synthetic"`
	} `json:"data" yaml:"data"`
}

func (s statedZeros) check() error {
	for _, c := range []struct {
		name string
		x    *float64
	}{{"audit.claim_mu", s.Audit.ClaimMu}, {"audit.claim_epsilon", s.Audit.ClaimEpsilon}} {
		if c.x != nil && *c.x == 0 {
			return fmt.Errorf("%s: %s, got 0", c.name, ClaimRule)
		}
	}
	// A stated 0 is the unset value FillDefaults replaces: the data would silently be the
	// defaults' (and hash alike), not what the config says. (Other sources' configs carry the
	// synthetic section's zeros in their JSON.)
	if s.Data.Source != "synthetic" {
		return nil
	}
	for _, c := range []struct {
		name string
		x    *float64
		def  string
	}{{"data.synthetic.separation", s.Data.Synthetic.Separation, "4"}, {"data.synthetic.noise", s.Data.Synthetic.Noise, "1"}} {
		if c.x != nil && *c.x == 0 {
			return fmt.Errorf("%s: 0 reads as unset and would give the default %s; state a positive value (a tiny one for next to nothing)", c.name, c.def)
		}
	}
	return nil
}

// Load reads a YAML config. Unknown fields are errors, so a typo never silently falls back to a
// default; defaults are filled and the result validated.
func Load(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		// "config adir: is a directory", not "read config: read adir: is a directory". A file
		// that cannot be read is a failure (exit status 1), as every input file's is.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	cfg, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// singleDocument checks that nothing follows the config's document: a second document after
// "---" (another config pasted below, or text that does not parse) would otherwise be dropped
// without a word, and the experiment run with the first alone. An empty document (a trailing
// "---") is fine.
func singleDocument(dec *yaml.Decoder) error {
	for {
		var next yaml.Node
		err := dec.Decode(&next)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("after the config's document: %w", err)
		}
		if doc := next.Content; len(doc) > 0 && !(doc[0].Kind == yaml.ScalarNode && doc[0].Tag == "!!null") {
			return fmt.Errorf("a second YAML document starts at line %d: a config is one document (remove the \"---\" and what follows, or merge it into the first)", next.Line)
		}
	}
}

// Parse decodes a YAML (or JSON, a subset of YAML) config, fills defaults and validates it.
func Parse(raw []byte) (*Config, error) {
	if err := wholeNumbers(raw); err != nil {
		return nil, &ConfigError{Err: err}
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	var cfg Config
	if err := dec.Decode(&cfg); errors.Is(err, io.EOF) {
		return nil, &ConfigError{Err: errors.New("the config is empty (no YAML document; README.md, \"Auditing your own deployment\", shows one)")}
	} else if err != nil {
		return nil, &ConfigError{Err: decodeError(err)}
	}
	if err := singleDocument(dec); err != nil {
		return nil, &ConfigError{Err: err}
	}
	var stated statedZeros
	if err := yaml.Unmarshal(raw, &stated); err == nil {
		if err := stated.check(); err != nil {
			return nil, &ConfigError{Err: err}
		}
	}
	cfg.FillDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, &ConfigError{Err: err}
	}
	return &cfg, nil
}

// JSON is the canonical form of the config stored in every run file.
func (c *Config) JSON() []byte {
	b, err := json.Marshal(c)
	if err != nil {
		panic(err) // the config holds only plain values; Marshal cannot fail
	}
	return b
}

// trainingView is the part of a config that decides what the runs are: everything but the audit
// settings, the name, where the data files live, and knobs that do not change results (threads,
// chunking, evaluation batch). Run files record this view, so changing a stage-only setting
// never asks for retraining, and shards trained on nodes that mount the data elsewhere agree.
func (c *Config) trainingView() Config {
	v := *c
	v.Name = ""
	v.Audit = AuditConfig{}
	v.Data.DataDir = ""
	v.Train.Threads, v.Train.ChunkPairs, v.Train.EvalBatch = 0, 0, 0
	v.Train.GroupPairs, v.Train.GroupMemory = 0, 0
	return v
}

// TrainingJSON is the canonical form of the training part of the config, stored in every run
// file.
func (c *Config) TrainingJSON() []byte {
	v := c.trainingView()
	return v.JSON()
}

// SameTraining reports whether runs trained with config a are the runs config b asks for.
func SameTraining(a, b *Config) bool {
	return bytes.Equal(a.TrainingJSON(), b.TrainingJSON())
}

// ConfigDiff lists the settings in which a and b differ, one "path: A -> B" line each, paths as
// in the YAML (train.noise_std, audit.claim_mu). Training lists only the training part.
func ConfigDiff(a, b *Config, training bool) []string {
	ja, jb := a.JSON(), b.JSON()
	if training {
		ja, jb = a.TrainingJSON(), b.TrainingJSON()
	}
	var ma, mb map[string]any
	if json.Unmarshal(ja, &ma) != nil || json.Unmarshal(jb, &mb) != nil {
		return []string{"configs differ"} // cannot happen: both are our own JSON
	}
	fa, fb := map[string]string{}, map[string]string{}
	flattenJSON("", ma, fa)
	flattenJSON("", mb, fb)
	keys := make([]string, 0, len(fa)+len(fb))
	for k := range fa {
		keys = append(keys, k)
	}
	for k := range fb {
		if _, ok := fa[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		va, oka := fa[k]
		vb, okb := fb[k]
		switch {
		case !oka:
			va = "(unset)"
		case !okb:
			vb = "(unset)"
		case va == vb:
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s -> %s", k, va, vb))
	}
	return out
}

// flattenJSON maps every leaf of a decoded JSON object to its dotted path; arrays are leaves.
func flattenJSON(prefix string, v any, out map[string]string) {
	if m, ok := v.(map[string]any); ok {
		for k, x := range m {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flattenJSON(p, x, out)
		}
		return
	}
	b, _ := json.Marshal(v)
	out[prefix] = string(b)
}

// FromJSON decodes the config stored in a run file.
func FromJSON(raw []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("decode experiment config: %w", err)
	}
	var stated statedZeros
	if err := json.Unmarshal(raw, &stated); err == nil {
		if err := stated.check(); err != nil {
			return nil, err
		}
	}
	cfg.FillDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// FillDefaults sets every field the config leaves zero to its default: the one place the
// defaults are set (Parse and FromJSON call it).
func (c *Config) FillDefaults() {
	if c.Name == "" {
		c.Name = "experiment"
	}
	if c.Data.Split == "" {
		c.Data.Split = "iid"
	}
	if c.Data.Source == "synthetic" {
		s := &c.Data.Synthetic
		if s.Dim == 0 {
			s.Dim = 32
		}
		if s.Classes == 0 {
			s.Classes = 10
		}
		if s.Separation == 0 {
			s.Separation = 4
		}
		if s.Noise == 0 {
			s.Noise = 1
		}
		if s.Samples == 0 {
			s.Samples = c.Data.Clients*c.Data.PerClient + c.Data.TestSamples + canaryPool
		}
	}
	if c.Adjacency.Kind == "" {
		c.Adjacency.Kind = "replace"
	}
	if c.Adjacency.Canary == "" {
		c.Adjacency.Canary = "dirac"
	}
	// A crafted gradient or client update: the experiment's data does not hold what makes the
	// worlds differ, so the attacks on the target sample see nothing. Their adversaries are
	// the informed ratio (every iterate) and the projection on the crafted direction (the
	// final model).
	crafted := false
	if g := c.Adjacency.Gradient; c.Adjacency.Kind == "gradient" && g != nil {
		if g.Direction == "" {
			g.Direction = canary.DiracDirection
		}
		gc := *g
		c.Train.GradientCanary, crafted = &gc, true
	}
	if u := c.Adjacency.CraftedUpdate; c.Adjacency.Kind == "remove-client" && u != nil {
		if u.Direction == "" {
			u.Direction = canary.DiracDirection
		}
		cu := *u
		c.Train.CraftedUpdate, crafted = &cu, true
	}
	if crafted && len(c.Audit.Attacks) == 0 {
		if c.Train.Informed {
			c.Audit.Attacks = append(c.Audit.Attacks, "informed-all", "informed-last")
		}
		if c.Train.RecordParams {
			c.Audit.Attacks = append(c.Audit.Attacks, "grad-canary")
		}
	}
	c.Audit.FillDefaults()
	if c.Train.Batching == "" {
		c.Train.Batching = "full"
	}
	if c.Train.Schedule == "" {
		c.Train.Schedule = "constant"
	}
	if c.Train.Seed == 0 {
		c.Train.Seed = c.Seed
	}
}

// ClientLevel reports whether the adjacency changes a whole client.
func (a AdjacencyConfig) ClientLevel() bool {
	return a.Kind == "replace-client" || a.Kind == "remove-client"
}

// FillDefaults sets the statistics settings left zero: the one place their defaults are set,
// for configs and for scores analyzed without one.
func (a *AuditConfig) FillDefaults() {
	a.Confidence = cmp.Or(a.Confidence, audit.DefaultConfidence)
	a.Delta = cmp.Or(a.Delta, theory.DefaultDelta)
}

// canaryPool is the number of samples kept out of every client and the test set, from which a
// "heldout" canary is drawn.
const canaryPool = 64

// Validate checks the experiment-level fields; the training fields are checked by train before
// any training starts. Every error names the field.
func (c *Config) Validate() error {
	var p fieldProblems
	c.validateData(p.bad)
	c.validateAdjacency(p.bad)
	c.validateAudit(p.bad)
	if c.Train.Seed != c.Seed {
		p.bad("train.seed", "is the master seed; set the top-level seed instead")
	}
	p.errs = append(p.errs, c.validateStages()...)
	if err := c.validateTraining(); err != nil {
		p.errs = append(p.errs, err)
	}
	return errors.Join(p.errs...)
}

// fieldProblems collects Validate's errors, each naming its field, in the order they are found.
type fieldProblems struct{ errs []error }

// bad records a problem with field.
func (p *fieldProblems) bad(field, format string, a ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, a...)))
}

// validateData checks the number of pairs and the data fields (source, clients, images, split,
// test samples): what the data preparation needs before anything is loaded.
func (c *Config) validateData(bad func(field, format string, a ...any)) {
	if c.Pairs < 1 || c.Pairs > MaxPairs {
		bad("pairs", "need 1 to %d, got %d", MaxPairs, c.Pairs)
	}
	if c.Data.Source == "" {
		bad("data.source", "missing (synthetic, a dataset name, or a path)")
	}
	if c.Data.Clients < 1 {
		bad("data.clients", "need at least 1, got %d", c.Data.Clients)
	}
	if im := c.Data.Images; im != nil {
		if c.Data.Source != "synthetic-images" {
			bad("data.images", "shapes the synthetic-images source only (data.source is %q)", c.Data.Source)
		}
		if im.Samples < 0 || im.Classes < 0 || im.Classes == 1 || im.Channels < 0 || im.Height < 0 || im.Width < 0 || im.Noise < 0 {
			bad("data.images", "samples, channels, height, width and noise must be >= 0 and classes 0 or >= 2 (0 takes the default), got %+v", *im)
		}
	}
	if c.Data.PerClient < 1 {
		bad("data.per_client", "need at least 1, got %d", c.Data.PerClient)
	}
	switch c.Data.Split {
	case "iid":
	case "dirichlet":
		if !(c.Data.DirichletAlpha > 0) {
			bad("data.dirichlet_alpha", "need > 0 for the dirichlet split, got %g", c.Data.DirichletAlpha)
		} else if c.Data.DirichletAlpha < minDirichletAlpha {
			// log Gamma(alpha) overflows below it: every class share comes out NaN, and the
			// clients would be filled class by class instead of by a draw.
			bad("data.dirichlet_alpha", "%g is below %g, where the Dirichlet draw underflows in float64", c.Data.DirichletAlpha, minDirichletAlpha)
		}
	default:
		bad("data.split", "%q is not iid or dirichlet", c.Data.Split)
	}
	if c.Data.TestSamples < 0 {
		bad("data.test_samples", "negative: %d", c.Data.TestSamples)
	}
	if c.Data.Limit < 0 {
		bad("data.limit", "negative: %d (0 keeps every sample)", c.Data.Limit)
	}
}

// minDirichletAlpha is the smallest concentration the label-skew split draws from.
const minDirichletAlpha = 1e-300

// validateAdjacency checks the adjacent pair: its kind, the target client and sample, the
// canary. The claim's sampling rate is checked here too, after the kind, in the order Validate
// has always reported them.
func (c *Config) validateAdjacency(bad func(field, format string, a ...any)) {
	switch c.Adjacency.Kind {
	case "replace", "add", "remove", "replace-client", "remove-client":
		if c.Adjacency.Gradient != nil {
			bad("adjacency.gradient", "a crafted gradient is adjacency kind gradient, not %s", c.Adjacency.Kind)
		}
	case "gradient":
		if c.Adjacency.Gradient == nil {
			bad("adjacency.gradient", "kind gradient needs the crafted gradient: gradient: {norm: G} (direction dirac or gaussian, coordinate)")
		}
	default:
		bad("adjacency.kind", "%q is not replace, add, remove, replace-client, remove-client or gradient", c.Adjacency.Kind)
	}
	if gc := c.Train.GradientCanary; gc != nil && (c.Adjacency.Gradient == nil || *gc != *c.Adjacency.Gradient) {
		bad("train.gradient_canary", "set from adjacency.gradient (kind gradient); give the crafted gradient there")
	}
	if c.Adjacency.CraftedUpdate != nil && c.Adjacency.Kind != "remove-client" {
		bad("adjacency.crafted_update", "a crafted update is the removed client's of kind remove-client (the DP-FedAvg family), not of kind %s", c.Adjacency.Kind)
	}
	if cu := c.Train.CraftedUpdate; cu != nil && (c.Adjacency.CraftedUpdate == nil || *cu != *c.Adjacency.CraftedUpdate) {
		bad("train.crafted_update", "set from adjacency.crafted_update (kind remove-client); give the crafted update there")
	}
	if !(c.Audit.ClaimSamplingRate >= 0 && c.Audit.ClaimSamplingRate <= 1) {
		bad("audit.claim_sampling_rate", "need a rate in [0, 1] (0: the one used), got %g", c.Audit.ClaimSamplingRate)
	}
	if c.Audit.ClaimSamplingRate > 0 && !c.Train.IsClientDP() {
		bad("audit.claim_sampling_rate", "only the DP-FedAvg family samples clients")
	}
	if c.Adjacency.Client < 0 || c.Adjacency.Client >= max(c.Data.Clients, 1) {
		bad("adjacency.client", "%d is not a client index in [0, %d)", c.Adjacency.Client, c.Data.Clients)
	}
	if c.Adjacency.Index < 0 || c.Adjacency.Index >= max(c.Data.PerClient, 1) {
		bad("adjacency.index", "%d is not a sample index in [0, %d)", c.Adjacency.Index, c.Data.PerClient)
	}
	switch c.Adjacency.Canary {
	case "dirac", "relabel", "heldout", "pattern", "blank":
	case CanaryCANIFE:
		if k := c.Adjacency.Kind; k != "replace" && k != "add" {
			bad("adjacency.canary", "canife crafts the sample C' holds: adjacency kind replace or add, not %s", k)
		}
		if k := c.Train.Model.Kind; k == "quadratic" {
			bad("adjacency.canary", "canife crafts against the gradients of a model with a softmax over classes; the quadratic model has none")
		}
	case "custom":
		if len(c.Adjacency.Features) == 0 {
			bad("adjacency.features", "a custom canary needs its features")
		}
		for i, x := range c.Adjacency.Features {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				bad("adjacency.features", "feature %d is %v: a canary's features are finite", i, x)
				break
			}
		}
	default:
		bad("adjacency.canary", "%q is not dirac, relabel, heldout, pattern, blank, canife or custom", c.Adjacency.Canary)
	}
	switch k, cn := c.Adjacency.Kind, c.Adjacency.Canary; {
	case (k == "replace-client") && (cn == "pattern" || cn == "blank"):
		// The canary client is every sample replaced by one canary sample, or relabelled.
		bad("adjacency.canary", "a replace-client canary client is built from dirac, relabel, heldout or custom, not %s", cn)
	case cn == "relabel" && c.Train.Model.Kind == "quadratic" && (k == "replace" || k == "replace-client"):
		// The quadratic model's loss ignores labels: a replaced sample that differs only in its
		// label leaves both worlds training alike (an added or removed one still counts).
		bad("adjacency.canary", "relabel changes only a label, which the quadratic model ignores: both worlds would train alike; use dirac, heldout, pattern, blank or custom")
	}
}

// MinConfidenceGap is the least 1 - confidence an audit accepts. The analysis certifies each
// of its n rows at 1 - (1 - confidence)/n (Bonferroni, audit.FamilyRowConfidence), and a
// sequential run each look at a share of that; float64 rounds 1 - x to 1 for x below 2^-54
// (about 5.6e-17), and holds it within that absolute error above. From 1 - confidence = 1e-9 a
// row's error level stays above 1e-13, within 0.06% of what the correction promises, for up to
// 10^4 rows and looks together, and never rounds to a confidence of 1 (which every analysis
// refuses, after the training) below 10^7 of them; closer to 1 it would, with the many rows of
// a fine-grained config or the early looks of a sequential run. No audit of a real training
// asks for a confidence that high: it would need far more pairs than any config trains.
const MinConfidenceGap = 1e-9

// CheckConfidence refuses a family-wise confidence that is not in (0, 1) or that is so close
// to 1 that the row and look corrections of the analysis would round it to 1
// (MinConfidenceGap). The config's audit.confidence and the commands' --confidence are checked
// with it, before anything is trained.
func CheckConfidence(confidence float64) error {
	if !(confidence > 0 && confidence < 1) {
		return fmt.Errorf("need a value in (0, 1), got %g", confidence)
	}
	// Compared with the float64 nearest 1 - MinConfidenceGap, which the message names, so that
	// the value it names is accepted (1 - 0.999999999 is a little below 1e-9 in float64).
	if limit := 1 - MinConfidenceGap; confidence > limit {
		return fmt.Errorf("need 1 - confidence >= %g (a confidence of at most %v), got %v: the analysis divides 1 - confidence among its rows and looks, and closer to 1 a row's confidence rounds to 1 in floating point",
			MinConfidenceGap, limit, confidence)
	}
	return nil
}

// validateAudit checks the audit fields: confidence, delta, method, smoothness, the claim and
// the inversion attack's budget.
func (c *Config) validateAudit(bad func(field, format string, a ...any)) {
	if err := CheckConfidence(c.Audit.Confidence); err != nil {
		bad("audit.confidence", "%v", err)
	}
	if !(c.Audit.Delta > 0 && c.Audit.Delta < 1) {
		bad("audit.delta", "need a value in (0, 1), got %g", c.Audit.Delta)
	}
	switch c.Audit.Method {
	case "", "split", "dkw", "band", "dkw+band":
	case "bonferroni":
		// An experiment's pairs are coupled (their worlds share noise), which Bonferroni's
		// argument cannot allow; the analysis refuses it, but only after training and scoring.
		bad("audit.method", "bonferroni assumes independent worlds, and an experiment's coupled pairs are not: use dkw+band (the default), dkw, band or split")
	case MethodOneRun:
		if c.Train.Canaries == nil {
			bad("audit.method", "one-run audits the canaries of each run: set train.canaries (count and kind)")
		}
	default:
		bad("audit.method", "%q is not bonferroni, split, dkw, band, dkw+band or one-run", c.Audit.Method)
	}
	for _, v := range []struct {
		name string
		x    float64
	}{{"audit.smoothness", c.Audit.Smoothness}} {
		if !(v.x >= 0) || math.IsInf(v.x, 0) {
			bad(v.name, "need a finite value >= 0, got %g", v.x)
		}
	}
	for _, v := range []struct {
		name string
		x    float64
	}{{"audit.claim_mu", c.Audit.ClaimMu}, {"audit.claim_epsilon", c.Audit.ClaimEpsilon}} {
		if v.x != 0 && !ValidClaim(v.x) { // 0 is the field left out; Parse refuses a stated 0
			bad(v.name, "%s, got %g", ClaimRule, v.x)
		}
	}
	if c.Audit.InvgradIterations < 0 || c.Audit.InvgradIterations > 1_000_000 {
		bad("audit.invgrad_iterations", "need 0 (the default, 400) to 1000000 iterations, got %d", c.Audit.InvgradIterations)
	}
	if c.Audit.InvgradPairs < -1 {
		bad("audit.invgrad_pairs", "need a number of pairs >= 1, 0 (the default) or -1 (every pair), got %d", c.Audit.InvgradPairs)
	}
	switch c.Audit.ClaimAbout {
	case "", ClaimAboutModels, ClaimAboutUploads:
	default:
		bad("audit.claim_about", "%q is not %s (the released global models, the default) or %s (each upload of the target client)", c.Audit.ClaimAbout, ClaimAboutModels, ClaimAboutUploads)
	}
	if c.Audit.ClaimMu > 0 && c.Audit.ClaimEpsilon > 0 {
		bad("audit", "claim either claim_mu or claim_epsilon, not both")
	}
	switch d := c.Audit.ClaimDelta; {
	case d == 0:
	case !(d > 0 && d < 1):
		bad("audit.claim_delta", "need a delta in (0, 1), got %g", d)
	case c.Audit.ClaimEpsilon == 0:
		bad("audit.claim_delta", "is the delta of claim_epsilon, which is not set")
	}
	// Without a stated claim a dp-fedavg audit judges its accountant's (remove-client), which a
	// noise multiplier of 0, or one so small that 2 z^2 underflows, leaves infinite: the audit
	// failed with the accountant's error after training.
	if z := c.Train.NoiseMultiplier; c.Train.Algorithm == algo.DPFedAvg && c.Adjacency.Kind == "remove-client" &&
		c.Audit.ClaimMu == 0 && c.Audit.ClaimEpsilon == 0 && z >= 0 && !(2*z*z > 0) {
		bad("train.noise_multiplier", "%g adds no noise the accountant can count (its epsilon is infinite), so there is no claim to audit: state audit.claim_epsilon or audit.claim_mu, or set noise_multiplier > 0", z)
	}
}

// validateTraining checks the training fields with the sizes the config states (a named
// dataset's classes are not known yet: 2 stands in), so that a mistake is reported before any
// data is loaded or file written; the engine checks again against the data.
func (c *Config) validateTraining() error {
	if c.Data.Clients >= 1 && c.Data.PerClient >= 1 {
		s := Sizes(c, nil)
		if err := c.Train.Check(c.Data.Clients, c.Data.PerClient, s.Classes); err != nil {
			return fmt.Errorf("train: %w", err)
		} else if _, err := train.MemoryOf(c.Train, s); err != nil {
			return fmt.Errorf("train: %w", err)
		}
	}
	return nil
}
