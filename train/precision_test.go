package train

import (
	"context"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
)

// TF32 and BF16 are the GPU's: the CPU backend refuses them with the backend named, and the
// config check refuses what is not fp32, tf32 or bf16.
func TestPrecisionChecks(t *testing.T) {
	cfg := pretrainConfig()
	cfg.Pretrain, cfg.Precision = nil, "tf32"
	c, cp := sampleWorlds(4, 3, 3)
	err := Train(context.Background(), Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: TargetInfo{Client: 1, Index: 2}, Pairs: PairRange{0, 1}, Recorder: &memRecorder{}})
	if err == nil || !strings.Contains(err.Error(), "precision tf32 needs the gpu backend") {
		t.Errorf("tf32 on the CPU: %v", err)
	}
	for _, p := range []string{"fp16", "fp64"} {
		cfg.Precision = compute.Precision(p)
		if err := cfg.Check(4, 3, 2); err == nil || !strings.Contains(err.Error(), "precision") {
			t.Errorf("precision %s: %v", p, err)
		}
	}
	for _, p := range []compute.Precision{compute.FP32, compute.TF32, compute.BF16} {
		cfg.Precision = p
		if err := cfg.Check(4, 3, 2); err != nil {
			t.Errorf("precision %s: %v", p, err)
		}
	}
}

// Runs trained elsewhere in TF32 are evaluated and replayed on the CPU in float32, not refused.
func TestEvaluateIgnoresPrecision(t *testing.T) {
	cfg := pretrainConfig()
	cfg.Pretrain, cfg.Precision = nil, compute.TF32
	c, cp := sampleWorlds(4, 3, 3)
	job := Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: TargetInfo{Client: 1, Index: 2}, Pairs: PairRange{0, 1}}
	params := [][]float32{{0.1, 0.2, 0.3}, {0.1, 0.2, 0.3}}
	if _, err := Evaluate(context.Background(), job, 1, params); err != nil {
		t.Errorf("evaluate a tf32 run: %v", err)
	}
	if _, err := ReplayRound(context.Background(), job, 0, params); err != nil {
		t.Errorf("replay a tf32 run: %v", err)
	}
}
