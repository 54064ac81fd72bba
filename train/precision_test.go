package train

import (
	"context"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
)

// TF32 is the GPU's: the CPU backend refuses it with the backend named, and the config check
// refuses what is not fp32 or tf32 (bf16 with the reason).
func TestPrecisionChecks(t *testing.T) {
	cfg := pretrainConfig()
	cfg.Pretrain, cfg.Precision = nil, "tf32"
	c, cp := sampleWorlds(4, 3, 3)
	err := Train(context.Background(), Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: TargetInfo{Client: 1, Index: 2}, Pairs: PairRange{0, 1}, Recorder: &memRecorder{}})
	if err == nil || !strings.Contains(err.Error(), "precision tf32 needs the gpu backend") {
		t.Errorf("tf32 on the CPU: %v", err)
	}
	for _, p := range []string{"bf16", "fp64"} {
		cfg.Precision = compute.Precision(p)
		if err := cfg.Check(4, 3, 2); err == nil || !strings.Contains(err.Error(), "precision") {
			t.Errorf("precision %s: %v", p, err)
		}
	}
	cfg.Precision = "fp32"
	if err := cfg.Check(4, 3, 2); err != nil {
		t.Errorf("precision fp32: %v", err)
	}
}
