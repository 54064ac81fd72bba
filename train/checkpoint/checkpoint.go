// Package checkpoint holds what a training of package train records: the state of every replica
// of a shard at a checkpoint round (Checkpoint, ReplicaState), the Recorder that receives it,
// and the names of the informed adversary's statistics, which are the run files' column names.
package checkpoint

import "context"

// Recorder receives the checkpoints of a run.
type Recorder interface {
	Checkpoint(ctx context.Context, cp *Checkpoint) error
}

// Names of the informed adversary's statistics in ReplicaState.Stats (the run-file column
// names).
const (
	StatLLRAll  = "informed_llr_all"
	StatLLRLast = "informed_llr_last"
	StatMu2     = "informed_mu2"
	// StatLLRUpload is the ratio of the target client's upload of the last round given the model
	// it started from (the uploads observer; Noisy-FedAvg, FedProx and DP-SGD only, whose
	// uploads carry the client's noise), and StatMu2Upload its mu^2 = ||phi_i(w) - phi'_i(w)||^2
	// / sigma^2.
	StatLLRUpload = "informed_llr_upload"
	StatMu2Upload = "informed_mu2_upload"
)

// Checkpoint is the state of every replica of a shard after Round rounds.
type Checkpoint struct {
	Round int
	// StatNames names the columns of every ReplicaState.Stats.
	StatNames []string
	// CanaryStatNames names the canary observations of every ReplicaState.CanaryStats.
	CanaryStatNames []string
	Replicas        []ReplicaState
}

// ReplicaState is one replica (one run of one pair in one world) at a checkpoint.
type ReplicaState struct {
	Pair     int
	World    int // 0: C, 1: C'
	Seed     uint64
	Diverged bool
	// TrainLoss is the mean loss over all samples of all clients of the replica's world (its
	// own canaries included; C' lacks the removed client under remove-client adjacency).
	TrainLoss float64
	// TestAccuracy is the accuracy on the test set (NaN without one).
	TestAccuracy float64
	// TargetLoss and TargetMargin are the loss and logit margin on the target sample as in C
	// ([0], epsilon) and as in C' ([1], epsilon').
	TargetLoss, TargetMargin [2]float64
	// Stats holds the values named by Checkpoint.StatNames.
	Stats []float64
	// Params is w_Round (only with train.Config.RecordParams).
	Params []float32
	// Upload is the target client's noisy upload in round Round-1 (only with
	// train.Config.RecordUpload;
	// nil at round 0 or when the target did not take part).
	Upload []float32
	// CanaryIn holds the run's canary inclusion bits and CanaryStats its observations of every
	// canary, named by Checkpoint.CanaryStatNames (only with train.Config.Canaries).
	CanaryIn    []bool
	CanaryStats [][]float64
}
