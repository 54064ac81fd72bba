package spec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/train/model"
)

const imagesConfig = `
name: images
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

// data.images shapes the synthetic-images source (3x32x32 colour images for a ResNet), and is
// refused for any other source.
func TestSyntheticImagesConfig(t *testing.T) {
	cfg, err := Parse([]byte(imagesConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Data.Source = "synthetic-images"
	cfg.Data.Images = &SyntheticImagesConfig{Classes: 4, Channels: 3, Height: 32, Width: 32}
	cfg.Train.Model = model.Config{Kind: "resnet", Blocks: 1, Width: 4, Groups: 2}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	data, err := Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(data.Shape) != "[3 32 32]" || data.Classes != 4 {
		t.Fatalf("shape %v, classes %d; want [3 32 32] and 4", data.Shape, data.Classes)
	}
	if s := Sizes(cfg, nil); s.Dim != 3*32*32 || s.Classes != 4 {
		t.Fatalf("sizes before loading: dim %d, classes %d", s.Dim, s.Classes)
	}
	cfg.Data.Source = "synthetic"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "data.images: shapes the synthetic-images source only") {
		t.Fatalf("data.images on another source: %v", err)
	}
}
