package train

import (
	"errors"
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/train/canary"
	"github.com/fedaudit/fedaudit/train/model"
	"github.com/fedaudit/fedaudit/train/privacy"
)

// Config is one training configuration: the algorithm, model, schedule and what to record.
type Config struct {
	// Algorithm is "fedavg" (Noisy-FedAvg), "fedprox" (Noisy-FedProx) or "dpsgd".
	Algorithm algo.Algorithm `json:"algorithm" yaml:"algorithm"`
	// Model selects the model.
	Model model.Config `json:"model" yaml:"model"`
	// Rounds is T.
	Rounds int `json:"rounds" yaml:"rounds"`
	// LocalSteps is K.
	LocalSteps int `json:"local_steps" yaml:"local_steps"`
	// Participants is n, the clients taking part in a round; 0 means all m.
	Participants int `json:"participants" yaml:"participants"`
	// LearningRate is eta.
	LearningRate float64 `json:"learning_rate" yaml:"learning_rate"`
	// Schedule is "constant", "cyclic" (eta/(k+1)), "stagewise" (eta/(t+1)), "iterative"
	// (eta/(tK+k+1)) or "table" (ScheduleTable[t][k]).
	Schedule string `json:"schedule" yaml:"schedule"`
	// ScheduleTable holds eta[t][k] for the "table" schedule: Rounds rows of LocalSteps values.
	ScheduleTable [][]float64 `json:"schedule_table,omitempty" yaml:"schedule_table,omitempty"`
	// ClipNorm is V: whole-gradient clipping for fedavg and fedprox, per-example for dpsgd.
	ClipNorm float64 `json:"clip_norm" yaml:"clip_norm"`
	// NoiseStd is sigma, the std of the noise each client adds to its parameters per round.
	NoiseStd float64 `json:"noise_std" yaml:"noise_std"`
	// ProxAlpha is FedProx's alpha (fedprox only).
	ProxAlpha float64 `json:"prox_alpha,omitempty" yaml:"prox_alpha,omitempty"`
	// Batching is "full" (every local step uses all the client's samples), "fixed" (BatchSize
	// samples without replacement, the same for every replica) or "poisson" (each sample
	// independently with probability BatchSize/N, drawn per pair from the run seed).
	Batching algo.Batching `json:"batching" yaml:"batching"`
	// BatchSize is B (fixed) or the expected batch size (poisson).
	BatchSize int `json:"batch_size" yaml:"batch_size"`
	// Seed is the master seed.
	Seed uint64 `json:"seed" yaml:"seed"`
	// Checkpoints are the rounds (0..Rounds) after which every replica is recorded.
	Checkpoints []int `json:"checkpoints" yaml:"checkpoints"`
	// Informed enables the informed adversary's statistics (needs NoiseStd > 0).
	Informed bool `json:"informed" yaml:"informed"`
	// RecordParams puts the global parameters into every checkpoint.
	RecordParams bool `json:"record_params" yaml:"record_params"`
	// RecordUpload puts the target client's noisy upload of the checkpoint's last round into
	// every checkpoint.
	RecordUpload bool `json:"record_upload" yaml:"record_upload"`
	// DivergenceNorm is the parameter norm above which a replica is declared diverged and
	// frozen; 0 means 1e6.
	DivergenceNorm float64 `json:"divergence_norm,omitempty" yaml:"divergence_norm,omitempty"`
	// Threads is the CPU backend's goroutine count; 0 means GOMAXPROCS.
	Threads int `json:"threads,omitempty" yaml:"threads,omitempty"`
	// Precision is the arithmetic of the matrix products: "fp32" (default, every backend),
	// "tf32" or "bf16" (inputs rounded to TensorFloat-32 or down-converted to bfloat16 on a
	// GPU's tensor cores, sums in float32; the gpu backend only, compute.Precisioner). Unlike
	// the knobs around it, it changes results, by the inputs' rounding (a relative 2^-11 or
	// 2^-8 per input).
	Precision compute.Precision `json:"precision,omitempty" yaml:"precision,omitempty"`
	// ChunkPairs is the number of pairs that go through a client's local steps together (a
	// cache-blocking knob: results do not depend on it); 0 means all pairs of the shard.
	ChunkPairs int `json:"chunk_pairs,omitempty" yaml:"chunk_pairs,omitempty"`
	// EvalBatch is the number of rows evaluated at once at checkpoints; 0 means 256.
	EvalBatch int `json:"eval_batch,omitempty" yaml:"eval_batch,omitempty"`
	// GroupPairs is the number of pairs trained together; 0 sizes the groups by GroupMemory.
	// A shard trains its groups one after another, so memory is bounded by the group, not by
	// the shard's pairs; results do not depend on it (a run's randomness comes from the master
	// seed and its pair index only).
	GroupPairs int `json:"group_pairs,omitempty" yaml:"group_pairs,omitempty"`
	// GroupMemory is the memory budget in bytes of one group (MemoryOf); 0 means
	// memory.DefaultGroupMemory.
	GroupMemory int64 `json:"group_memory,omitempty" yaml:"group_memory,omitempty"`

	// Mechanism is the distribution of the privacy noise: "gaussian" (default, also ""),
	// "laplace" or "staircase", each at the same standard deviation (see NoiseOf). It applies
	// to the uploads of fedavg and fedprox and to the server's noise of the DP-FedAvg family.
	Mechanism algo.Mechanism `json:"mechanism,omitempty" yaml:"mechanism,omitempty"`
	// StaircaseEpsilon and StaircaseGamma shape the staircase noise (gamma 0: optimal).
	StaircaseEpsilon float64 `json:"staircase_epsilon,omitempty" yaml:"staircase_epsilon,omitempty"`
	StaircaseGamma   float64 `json:"staircase_gamma,omitempty" yaml:"staircase_gamma,omitempty"`

	// The DP-FedAvg family (dp-fedavg, idp-fedavg, adaptive-fedavg; see dpfedavg.go).
	// SamplingRate is q, each client's Poisson sampling probability per round (for
	// adaptive-fedavg the spending rate).
	SamplingRate float64 `json:"sampling_rate,omitempty" yaml:"sampling_rate,omitempty"`
	// NoiseMultiplier is dp-fedavg's z: the server adds N(0, (z c)^2 I) to the sum.
	NoiseMultiplier float64 `json:"noise_multiplier,omitempty" yaml:"noise_multiplier,omitempty"`
	// UpdateClip is c, the norm every client's model update is clipped to (the average clip
	// norm for idp-fedavg and adaptive-fedavg).
	UpdateClip float64 `json:"update_clip,omitempty" yaml:"update_clip,omitempty"`
	// ServerLR scales the server step; 0 means 1 (the paper's step).
	ServerLR float64 `json:"server_lr,omitempty" yaml:"server_lr,omitempty"`
	// SkipUpdateClip is a deliberate mis-calibration for audits: updates are not clipped,
	// while the noise (and any claim) is still scaled to update_clip.
	SkipUpdateClip bool `json:"skip_update_clip,omitempty" yaml:"skip_update_clip,omitempty"`
	// Privacy holds the per-group budgets of idp-fedavg and adaptive-fedavg.
	Privacy *privacy.Config `json:"privacy,omitempty" yaml:"privacy,omitempty"`

	// Canaries, when set, puts k canaries into every run, each included with probability 1/2
	// (canaries.go): the one-run audits' many canaries per training.
	Canaries *canary.Config `json:"canaries,omitempty" yaml:"canaries,omitempty"`

	// GradientCanary, when set, crafts the target sample's gradient in world C' (canary.Gradient:
	// Norm u added to its gradient in every local step that uses it). The experiment sets it
	// from adjacency kind "gradient"; fedavg and fedprox only, trained in the direct local-step
	// form.
	GradientCanary *canary.Gradient `json:"gradient_canary,omitempty" yaml:"gradient_canary,omitempty"`

	// CraftedUpdate, when set, makes the target client of remove-client adjacency a canary
	// client (canary.Update): in every round it is sampled it sends clip_t u instead of
	// training. The experiment sets it from adjacency.crafted_update; the DP-FedAvg family
	// only.
	CraftedUpdate *canary.Update `json:"crafted_update,omitempty" yaml:"crafted_update,omitempty"`

	// Pretrain, when set, makes w_0 the audit's choice: a model pretrained without privacy on
	// the data both worlds share (Pretrain, pretrain.go) instead of the seeded initialization.
	Pretrain *Pretrain `json:"pretrain,omitempty" yaml:"pretrain,omitempty"`
}

// TargetInfo says which sample differs between the worlds: sample Index of client Client.
type TargetInfo struct {
	Client int `json:"client" yaml:"client"`
	Index  int `json:"index" yaml:"index"`
	// WholeClient: the worlds differ in all of client Client's data (client-level adjacency,
	// replace-client); the client has as many samples in both, and Index only picks the
	// sample whose loss and margin every checkpoint records.
	WholeClient bool `json:"whole_client,omitempty" yaml:"whole_client,omitempty"`
	// Absent: C' lacks client Client (remove-client; implies WholeClient), so the C' world
	// passed to Train has one client fewer. Only the DP-FedAvg family supports it: the
	// client's clipped update is left out of C''s sum, while the noise and the divisor
	// q m (a public constant of the deployment) stay as they are.
	Absent bool `json:"absent,omitempty" yaml:"absent,omitempty"`
}

// PairRange selects pairs First, ..., First+Count-1 of an experiment (one shard).
type PairRange struct {
	First int `json:"first" yaml:"first"`
	Count int `json:"count" yaml:"count"`
}

// validate checks the configuration for m clients of at least n samples, samples of the given
// shape and dim features (nil and 0 when not known yet) and classes.
func (c *Config) validate(m, n int, shape []int, dim, classes int) error {
	var p problems
	c.checkAlgorithm(&p, m)
	c.checkSchedule(&p, m)
	c.checkSampling(&p, n)
	c.checkModel(&p, shape, dim, classes)
	if c.Canaries != nil {
		p = append(p, c.Canaries.Check(c.Algorithm, c.Mechanism, m, n)...)
		if c.Canaries.Gradients() && c.Batching != algo.Full {
			// In every step of their client: a record a minibatch draws now and then would
			// count on the draw's secrecy, which a canary in every step does not have.
			p.add("canaries.kind", "gradient canaries join every local step of their client: batching full, not %s", c.Batching)
		}
	}
	if c.GradientCanary != nil {
		p = append(p, c.GradientCanary.Check(c.Algorithm, paramCount(c, shape, dim, classes))...)
		if c.Canaries != nil {
			p.add("gradient_canary", "a coupled-pairs adversary: not with the one-run canaries (train.canaries)")
		}
	}
	if c.Pretrain != nil {
		p = append(p, c.Pretrain.check(c.LearningRate)...)
	}
	if c.CraftedUpdate != nil {
		p = append(p, c.CraftedUpdate.Check(c.Algorithm, paramCount(c, shape, dim, classes))...)
		if c.Canaries != nil {
			p.add("crafted_update", "a coupled-pairs adversary: not with the one-run canaries (train.canaries)")
		}
	}
	return errors.Join(p...)
}

// problems collects a configuration's errors, each naming its field.
type problems []error

func (p *problems) add(field, format string, a ...any) {
	*p = append(*p, fmt.Errorf("config: %s: %s", field, fmt.Sprintf(format, a...)))
}

// checkAlgorithm checks the algorithm for m clients, the mechanism and the fields only some
// algorithms take.
func (c *Config) checkAlgorithm(p *problems, m int) {
	switch c.Algorithm {
	case algo.FedAvg, algo.FedProx:
	case algo.DPSGD:
		if m != 1 {
			p.add("algorithm", "dpsgd trains one client, the datasets have %d", m)
		}
	case algo.DPFedAvg, algo.IDPFedAvg, algo.AdaptiveFedAvg:
		if err := c.validateClientDP(m); err != nil {
			*p = append(*p, err)
		}
	default:
		p.add("algorithm", "%v", c.Algorithm.Validate())
	}
	switch c.mechanism() {
	case algo.Gaussian, algo.Laplace:
		if c.StaircaseEpsilon != 0 || c.StaircaseGamma != 0 {
			p.add("staircase_epsilon", "only the staircase mechanism takes staircase_epsilon and staircase_gamma")
		}
	case algo.Staircase:
		if !(c.StaircaseEpsilon > 0) || math.IsInf(c.StaircaseEpsilon, 0) {
			p.add("staircase_epsilon", "the staircase mechanism needs a finite epsilon > 0, got %g", c.StaircaseEpsilon)
		}
		if !(c.StaircaseGamma >= 0 && c.StaircaseGamma <= 1) {
			p.add("staircase_gamma", "need a value in [0, 1] (0: optimal), got %g", c.StaircaseGamma)
		}
	default:
		p.add("mechanism", "%v", c.Mechanism.Validate())
	}
	if c.Informed && !c.IsClientDP() && c.mechanism() != algo.Gaussian {
		p.add("informed", "the informed likelihood ratio of fedavg, fedprox and dpsgd is Gaussian; mechanism %s has none (the DP-FedAvg family computes it for every mechanism)", c.mechanism())
	}
	if !c.IsClientDP() {
		for _, f := range []struct {
			name string
			set  bool
		}{{"sampling_rate", c.SamplingRate != 0}, {"noise_multiplier", c.NoiseMultiplier != 0}, {"update_clip", c.UpdateClip != 0},
			{"server_lr", c.ServerLR != 0}, {"skip_update_clip", c.SkipUpdateClip}, {"privacy", c.Privacy != nil}} {
			if f.set {
				p.add(f.name, "only the DP-FedAvg family (dp-fedavg, idp-fedavg, adaptive-fedavg) takes it")
			}
		}
	}
	if c.Algorithm == algo.FedProx && !(c.ProxAlpha > 0) {
		p.add("prox_alpha", "fedprox needs alpha > 0, got %g", c.ProxAlpha)
	}
	if c.Algorithm != algo.FedProx && c.ProxAlpha != 0 {
		p.add("prox_alpha", "only fedprox takes alpha, got %g", c.ProxAlpha)
	}
}

// checkSchedule checks rounds, local steps, participants out of m and the learning rates.
func (c *Config) checkSchedule(p *problems, m int) {
	if c.Rounds < 1 {
		p.add("rounds", "need at least 1, got %d", c.Rounds)
	}
	if c.LocalSteps < 1 {
		p.add("local_steps", "need at least 1, got %d", c.LocalSteps)
	}
	if c.Participants < 0 || c.Participants > m {
		p.add("participants", "need 0 (all) to %d clients, got %d", m, c.Participants)
	}
	if c.Schedule != "table" && (!(c.LearningRate > 0) || math.IsInf(c.LearningRate, 0)) {
		p.add("learning_rate", "need a finite positive value, got %g", c.LearningRate)
	}
	switch c.Schedule {
	case "constant", "cyclic", "stagewise", "iterative":
	case "table":
		if len(c.ScheduleTable) != c.Rounds {
			p.add("schedule_table", "need %d rows (rounds), got %d", c.Rounds, len(c.ScheduleTable))
		}
		for t, row := range c.ScheduleTable {
			if len(row) != c.LocalSteps {
				p.add("schedule_table", "row %d has %d values, need %d (local_steps)", t, len(row), c.LocalSteps)
				break
			}
			for _, v := range row {
				if !(v >= 0) || math.IsInf(v, 0) {
					p.add("schedule_table", "row %d holds %g, need finite non-negative values", t, v)
					break
				}
			}
		}
	default:
		p.add("schedule", "%q is not constant, cyclic, stagewise, iterative or table", c.Schedule)
	}
}

// checkSampling checks clipping, noise, batching (n: the smallest client's samples),
// checkpoints and the engine's sizes.
func (c *Config) checkSampling(p *problems, n int) {
	if !(c.ClipNorm >= 0) || math.IsInf(c.ClipNorm, 0) {
		p.add("clip_norm", "need a finite value >= 0 (0: no clipping), got %g", c.ClipNorm)
	}
	if c.Algorithm == algo.DPSGD && !(c.ClipNorm > 0) {
		p.add("clip_norm", "dpsgd clips every example: need V > 0")
	}
	if !(c.NoiseStd >= 0) || math.IsInf(c.NoiseStd, 0) {
		p.add("noise_std", "need a finite value >= 0, got %g", c.NoiseStd)
	}
	if c.Informed && !c.IsClientDP() && !(c.NoiseStd > 0) {
		p.add("informed", "the likelihood ratio needs noise_std > 0")
	}
	switch c.Batching {
	case algo.Full:
	case algo.Fixed, algo.Poisson:
		if c.BatchSize < 1 || c.BatchSize > n {
			p.add("batch_size", "need 1 to %d (the smallest client), got %d", n, c.BatchSize)
		}
	default:
		p.add("batching", "%v", c.Batching.Validate())
	}
	for _, t := range c.Checkpoints {
		if t < 0 || t > c.Rounds {
			p.add("checkpoints", "round %d is outside 0..%d", t, c.Rounds)
			break
		}
	}
	if c.DivergenceNorm < 0 {
		p.add("divergence_norm", "need >= 0, got %g", c.DivergenceNorm)
	}
	if c.ChunkPairs < 0 {
		p.add("chunk_pairs", "need >= 0, got %d", c.ChunkPairs)
	}
	if c.EvalBatch < 0 {
		p.add("eval_batch", "need >= 0, got %d", c.EvalBatch)
	}
	if c.GroupPairs < 0 {
		p.add("group_pairs", "need >= 0, got %d", c.GroupPairs)
	}
	if c.GroupMemory < 0 {
		p.add("group_memory", "need >= 0, got %d", c.GroupMemory)
	}
}

// checkModel checks the model for data of the given shape, dim and number of classes: the
// model's own fields (model.Config.Check), and that the quadratic model, which has no
// per-example gradients, is not trained by dpsgd.
func (c *Config) checkModel(p *problems, shape []int, dim, classes int) {
	switch c.Precision {
	case "", compute.FP32, compute.TF32, compute.BF16:
	default:
		p.add("precision", "%q is not fp32, tf32 or bf16", c.Precision)
	}
	if c.Model.Kind == "quadratic" && c.Algorithm == algo.DPSGD {
		p.add("model.kind", "the quadratic model has no per-example gradients for dpsgd")
	}
	*p = append(*p, c.Model.Check(shape, dim, classes)...)
}

// LearningRateAt is eta_{k,t}, the learning rate of local step k in round t.
func (c *Config) LearningRateAt(t, k int) float64 {
	switch c.Schedule {
	case "cyclic":
		return c.LearningRate / float64(k+1)
	case "stagewise":
		return c.LearningRate / float64(t+1)
	case "iterative":
		return c.LearningRate / float64(t*c.LocalSteps+k+1)
	case "table":
		return c.ScheduleTable[t][k]
	}
	return c.LearningRate
}

// Check validates the configuration for m clients of at least n samples each and the given
// number of classes, before any data is loaded (the input dimension does not enter the checks).
// The engine checks again against the real data.
func (c *Config) Check(m, n, classes int) error { return c.validate(m, n, nil, 0, classes) }

// CheckModel checks the model against the data's sample shape and number of classes alone,
// so that a model that cannot take the data (a CNN's pooling window larger than its input, a
// dense layer of the wrong width) is refused as soon as the data is known, before any file
// is written.
func (c *Config) CheckModel(shape []int, classes int) error {
	dim := 1
	for _, s := range shape {
		dim *= s
	}
	var p problems
	c.checkModel(&p, shape, dim, classes)
	return errors.Join(p...)
}

// paramCount is the model's parameter count for samples of the given shape and dim features,
// 0 when the data is not known yet (a canary's coordinate is checked against the model then).
func paramCount(c *Config, shape []int, dim, classes int) int {
	if dim > 0 {
		if m, err := model.New(c.Model, shape, dim, classes); err == nil {
			return m.NumParams()
		}
	}
	return 0
}
