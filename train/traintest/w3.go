package traintest

import (
	"context"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/model"
)

// W3 (issue 26; docs/gpu.md): Noisy-FedAvg of ResNet-18 with GroupNorm (the CIFAR stem: a 3x3
// convolution and no max pooling; residual stages of widths 64, 128, 256, 512, two blocks each,
// 32 groups) on synthetic 3x32x32 colour images (class prototypes plus pixel noise in [0, 1]),
// m = 10 clients x 64 images, 10 classes, K = 1 local step on B = 32, eta = 0.05, V = 1,
// sigma = 0.01, T = 2 rounds by default; replicas half on C, half on C' (client 0's image 0
// replaced by one of another class). The paper's CIFAR-10 model at the size of a GPU benchmark.
const (
	w3Clients, W3PerClient, w3Classes, w3Side = 10, 64, 10, 32
	// W3DefaultRounds is the rounds the kit times (two: one round of ResNet-18 for every
	// replica already saturates the device).
	W3DefaultRounds = 2
)

// W3Config is the training configuration of W3.
func W3Config() train.Config {
	return train.Config{
		Algorithm: algo.FedAvg, Model: model.Config{Kind: "resnet", Stages: 4, Blocks: 2, Width: 64, Groups: 32},
		Rounds: W3DefaultRounds, LocalSteps: 1, LearningRate: 0.05, Schedule: "constant", ClipNorm: 1, NoiseStd: 0.01,
		Batching: "fixed", BatchSize: 32, Seed: 3,
	}
}

// W3Data returns W3's two worlds: C and C' differ in image 0 of client 0, which C' replaces by
// an image of the next class.
func W3Data() (c, cp []*datasets.Dataset, target train.TargetInfo, err error) {
	return imageWorlds(datasets.SyntheticImageConfig{Name: "w3", N: w3Clients*W3PerClient + 1,
		Classes: w3Classes, Channels: 3, Height: w3Side, Width: w3Side, Noise: 0.3, Seed: 3}, w3Clients, W3PerClient)
}

// RunW3 runs benchmark W3 with the given (even) number of replicas and rounds on be (nil: the
// CPU backend through train.Train), after a one-round warm-up, and returns its timing; the
// nominal FLOPs are three times the model's forward FLOPs per image (model.ForwardFLOPs).
func RunW3(ctx context.Context, be compute.Backend, replicas, rounds int) (CNNResult, error) {
	c, cp, tgt, err := W3Data()
	if err != nil {
		return CNNResult{}, err
	}
	cfg := W3Config()
	fwd, err := model.ForwardFLOPs(cfg.Model, []int{3, w3Side, w3Side}, w3Classes)
	if err != nil {
		return CNNResult{}, err
	}
	return runCNN(ctx, be, "W3", cfg, c, cp, tgt, replicas, rounds, fwd)
}
