package cost

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/nn"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/model"
)

const planConfig = `
name: plan
seed: 3
pairs: 40
data:
  source: synthetic
  synthetic: {dim: 8, classes: 3}
  clients: 3
  per_client: 10
  test_samples: 30
adjacency: {kind: replace, client: 0, index: 2, canary: dirac}
train:
  algorithm: fedavg
  model: {kind: softmax}
  rounds: 3
  local_steps: 2
  learning_rate: 0.1
  clip_norm: 1
  noise_std: 0.05
  checkpoints: [1, 3]
  informed: true
`

// TestPlanHandCounts checks Plan's counts against sums done by hand for two small configs.
func TestPlanHandCounts(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(c *spec.Config)
		shards int
		// Hand-computed: d, train FLOPs, eval FLOPs, largest shard's pairs, vector bytes.
		d                   int
		train, eval         float64
		largestPairs        int
		vectorBytes, rows   int64
		localTrainings, eRs int
	}{{
		// Softmax regression on 8 features, 3 classes: d = (8+1)·3 = 27. 80 replicas · 3 rounds
		// · (3 clients + 1 informed) · 2 steps · 6·10 rows·27 = 3,110,400. Eval: 80 replicas ·
		// 2 checkpoints · 2·27 · (3·10 + 30 + 2 rows) = 535,680. 40 pairs in 3 shards: 13, 13, 14.
		name: "softmax informed", shards: 3,
		d: 27, train: 3110400, eval: 535680, largestPairs: 14, rows: 160,
		localTrainings: 4, eRs: 62,
	}, {
		// MLP 8-5-3: d = 9·5 + 6·3 = 63; fixed batches of 4, no informed statistics, params
		// recorded. Train: 80 · 3 · 3 · 2 · 6·4·63 = 2,177,280. Eval: 80 · 2 · 2·63 · 62 =
		// 1,249,920. Vectors: 160 rows · 63 · 4 bytes = 40,320.
		name: "mlp fixed params",
		edit: func(c *spec.Config) {
			c.Train.Model.Kind, c.Train.Model.Hidden, c.Train.Model.Activation = "mlp", []int{5}, "tanh"
			c.Train.Batching, c.Train.BatchSize = "fixed", 4
			c.Train.Informed = false
			c.Train.RecordParams = true
		},
		shards: 1,
		d:      63, train: 2177280, eval: 1249920, largestPairs: 40, vectorBytes: 40320, rows: 160,
		localTrainings: 3, eRs: 62,
	}, {
		// A CNN on 28x28 synthetic images (10 classes): conv 1->2 3x3 (2x26x26), ReLU, max
		// pool 2 (2x13x13), flatten, dense 338->10; d = 2·9+2 + 338·10+10 = 3,410. One row's
		// forward pass, layer by layer (2 per multiply-add, one per bias add and elementwise
		// value; the model pools before the ReLU): conv (2·9+1)·1352 = 25,688, pool 4·338 =
		// 1,352, ReLU 338, dense (2·338+1)·10 = 6,770: 34,148. Train: 80 · 3 · 4 · 2 · 3·10 rows ·
		// 34,148 = 1,966,924,800. Eval: 80 · 2 · 34,148 · 62 = 338,748,160.
		name: "cnn informed",
		edit: func(c *spec.Config) {
			c.Data.Source = "synthetic-images"
			c.Train.Model = model.Config{Kind: "sequential", Layers: []nn.LayerSpec{
				{Kind: "conv2d", Out: 2, Kernel: 3}, {Kind: "relu"}, {Kind: "maxpool", Kernel: 2}, {Kind: "flatten"}, {Kind: "dense", Out: 10}}}
		},
		shards: 1,
		d:      3410, train: 1966924800, eval: 338748160, largestPairs: 40, rows: 160,
		localTrainings: 4, eRs: 62,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := spec.Parse([]byte(planConfig))
			if err != nil {
				t.Fatal(err)
			}
			if tt.edit != nil {
				tt.edit(cfg)
			}
			data, err := spec.Prepare(cfg)
			if err != nil {
				t.Fatal(err)
			}
			w, err := Plan(cfg, data, tt.shards)
			if err != nil {
				t.Fatal(err)
			}
			// Counts are integers well below 2^53: exact in float64.
			if w.Params != tt.d || w.TrainFLOPs != tt.train || w.EvalFLOPs != tt.eval || w.FLOPs != tt.train+tt.eval {
				t.Errorf("d %d, train %g, eval %g, total %g; want %d, %g, %g, %g",
					w.Params, w.TrainFLOPs, w.EvalFLOPs, w.FLOPs, tt.d, tt.train, tt.eval, tt.train+tt.eval)
			}
			if w.LocalTrainings != tt.localTrainings || w.EvalRows != tt.eRs || w.Rows != tt.rows || w.VectorBytes != tt.vectorBytes {
				t.Errorf("local trainings %d, eval rows %d, rows %d, vector bytes %d; want %d, %d, %d, %d",
					w.LocalTrainings, w.EvalRows, w.Rows, w.VectorBytes, tt.localTrainings, tt.eRs, tt.rows, tt.vectorBytes)
			}
			if w.ReplicaRounds != 240 {
				t.Errorf("replica-rounds %d, want 80·3 = 240", w.ReplicaRounds)
			}
			wantShard := w.FLOPs * float64(tt.largestPairs) / 40
			if math.Abs(w.ShardFLOPs-wantShard) > 1e-9*wantShard {
				t.Errorf("shard FLOPs %g, want %g", w.ShardFLOPs, wantShard)
			}
		})
	}
}

func TestPlanRefusesEmptyShards(t *testing.T) {
	cfg, data := prepared(t, planConfig)
	_, err := Plan(cfg, data, 41)
	var ce *spec.ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("41 shards of 40 pairs: %v, want a configuration error (exit 2)", err)
	}
}

// TestCalibrate checks that a calibration measures something: a positive speed, from a slice
// no bigger than the job, and that a larger budget does not shrink the slice.
func TestCalibrate(t *testing.T) {
	cfg, data := prepared(t, planConfig)
	cal, err := Calibrate(context.Background(), cfg, data, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !(cal.FLOPS > 0) || math.IsInf(cal.FLOPS, 0) || cal.Pairs != 4 || cal.Rounds < 1 || cal.Rounds > cfg.Train.Rounds || cal.Elapsed <= 0 {
		t.Errorf("calibration %+v", cal)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Calibrate(ctx, cfg, data, time.Second); err == nil {
		t.Error("a cancelled calibration succeeded")
	}
}

// CalibrateWith times the given trainer on a slice of the pairs asked for (at most the
// experiment's), as `audit plan --backend gpu` does with one group's pairs on the device, and
// passes the trainer's error on.
func TestCalibrateWithTrainer(t *testing.T) {
	cfg, data := prepared(t, planConfig)
	var seen []int
	trainer := func(ctx context.Context, job train.Job) error {
		seen = append(seen, job.Pairs.Count)
		time.Sleep(5 * time.Millisecond)
		return nil
	}
	cal, err := CalibrateWith(context.Background(), cfg, data, 20*time.Millisecond, 6, trainer)
	if err != nil {
		t.Fatal(err)
	}
	want := min(6, cfg.Pairs)
	if cal.Pairs != want || len(seen) == 0 || seen[0] != want || !(cal.FLOPS > 0) {
		t.Errorf("calibration %+v, trainer saw %v pairs; want slices of %d pairs", cal, seen, want)
	}
	boom := errors.New("device lost")
	if _, err := CalibrateWith(context.Background(), cfg, data, time.Second, 6, func(context.Context, train.Job) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("got %v, want the trainer's error", err)
	}
}

// TestCalibrateRefusesWhatCannotFit checks that a budget too small for one round of one pair
// even at the optimistic rate is refused up front, with the work it would take, instead of
// training far past the budget; and that a budget fitting one pair but not four shrinks the
// slice to one pair.
func TestCalibrateRefusesWhatCannotFit(t *testing.T) {
	cfg, data := prepared(t, planConfig)
	onePair := *cfg
	onePair.Pairs = 1
	one, err := Plan(withRounds(&onePair, 1), data, 1)
	if err != nil {
		t.Fatal(err)
	}
	oneGuess := time.Duration(Seconds(one.FLOPs, CalibrationRateGuess) * float64(time.Second))
	_, err = Calibrate(context.Background(), cfg, data, oneGuess)
	var tooLong *CalibrationTooLongError
	if !errors.As(err, &tooLong) {
		t.Fatalf("budget of half a round of one pair: got %v, want a CalibrationTooLongError", err)
	}
	if tooLong.FLOPs != one.FLOPs || tooLong.Guess != oneGuess {
		t.Errorf("refusal %+v, want %g FLOP and %s", tooLong, one.FLOPs, oneGuess)
	}
	// CalibrationFits says the same without training (the CLI asks it before saying it trains).
	var fits *CalibrationTooLongError
	if err := CalibrationFits(cfg, data, oneGuess); !errors.As(err, &fits) || *fits != *tooLong {
		t.Errorf("CalibrationFits with half a round's budget: %v, want %+v", err, tooLong)
	}
	if err := CalibrationFits(cfg, data, 2*oneGuess); err != nil {
		t.Errorf("CalibrationFits with a round's budget: %v", err)
	}
	// Twice one pair's guess fits one pair (half the budget) but not four.
	cal, err := Calibrate(context.Background(), cfg, data, 2*oneGuess)
	if err != nil {
		t.Fatal(err)
	}
	if cal.Pairs != 1 {
		t.Errorf("budget for one pair: calibrated %d pairs", cal.Pairs)
	}
}

// prepared parses a config and prepares its data, failing the test on any error.
func prepared(t *testing.T, text string) (*spec.Config, *spec.Data) {
	t.Helper()
	cfg, err := spec.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, data
}

// With train.pretrain, calibration pretrained w_0 again inside the clock on every try and
// charged it to the slice's rounds: `audit plan` said 36 min for a training of 48 s. The
// trainer it times gets no pretraining, and the plan counts the pretraining's work apart, once
// a shard: rounds x clients x local steps x 3 x per_client rows x the forward pass.
func TestPlanCountsPretrainingApart(t *testing.T) {
	cfg, data := prepared(t, planConfig)
	plain, err := Plan(cfg, data, 3)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Train.Pretrain = &train.Pretrain{Rounds: 7, LocalSteps: 2}
	pre, err := Plan(cfg, data, 3)
	if err != nil {
		t.Fatal(err)
	}
	perShard := 7.0 * float64(cfg.Data.Clients) * 2 * 3 * float64(cfg.Data.PerClient) * plain.ForwardFLOPs
	if math.Abs(pre.PretrainFLOPs-3*perShard) > 1e-9*perShard || math.Abs(pre.FLOPs-plain.FLOPs-3*perShard) > 1e-9*perShard ||
		math.Abs(pre.ShardFLOPs-plain.ShardFLOPs-perShard) > 1e-9*perShard {
		t.Errorf("pretraining %g of %g (shard %g of %g), want %g a shard of 3", pre.PretrainFLOPs, pre.FLOPs, pre.ShardFLOPs, plain.ShardFLOPs, perShard)
	}
	var pretrained int
	trainer := func(ctx context.Context, job train.Job) error {
		if job.Config.Pretrain != nil {
			pretrained++
		}
		return nil
	}
	if _, err := CalibrateWith(context.Background(), cfg, data, 20*time.Millisecond, 4, trainer); err != nil {
		t.Fatal(err)
	}
	if pretrained > 0 {
		t.Errorf("%d timed trainings pretrained w_0", pretrained)
	}
}

// A training whose cost does not all grow with its rounds (1000 orthonormal canary directions
// made once: 5 s beside 0.7 s a round) was planned as if every second were a round's: 7 min
// for a training of 36 s. The calibration times two round counts and charges the rounds only
// their difference; the rest is the set-up.
func TestCalibrationSeparatesTheSetUp(t *testing.T) {
	cfg, data := prepared(t, planConfig)
	cfg.Train.Rounds = 8
	const setup, perRound = 200 * time.Millisecond, 40 * time.Millisecond
	trainer := func(ctx context.Context, job train.Job) error {
		time.Sleep(setup + time.Duration(job.Config.Rounds)*perRound)
		return nil
	}
	cal, err := CalibrateWith(context.Background(), cfg, data, 20*time.Millisecond, 4, trainer)
	if err != nil {
		t.Fatal(err)
	}
	if cal.Setup < setup/2 || cal.Setup > 2*setup {
		t.Errorf("set-up %v, want about %v (calibration %+v)", cal.Setup, setup, cal)
	}
	slice := *cfg
	slice.Pairs = cal.Pairs
	one, err := Plan(withRounds(&slice, 1), data, 1)
	if err != nil {
		t.Fatal(err)
	}
	two, err := Plan(withRounds(&slice, 2), data, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Duration((two.FLOPs - one.FLOPs) / cal.FLOPS * float64(time.Second)); got < perRound/2 || got > 2*perRound {
		t.Errorf("a round at the measured rate takes %v, want about %v", got, perRound)
	}
}
