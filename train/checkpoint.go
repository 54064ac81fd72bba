package train

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/train/checkpoint"
)

// The checkpoint observer: at every checkpoint round the engine evaluates every replica at
// w_round (training loss, test accuracy, the target sample's loss and margin in both worlds),
// adds the informed adversary's statistics and the recorded parameters and uploads, and hands
// the result to the Recorder.

// evalBuffers holds the evaluation's per-row losses and margins, allocated at the first
// checkpoint.
type evalBuffers struct {
	loss, margin         compute.Buffer
	hostLoss, hostMargin []float32
}

// recordCheckpoint evaluates every replica at w_round and hands the checkpoint to rec, unless
// the training was cancelled meanwhile (the evaluation stops early and its result is not used).
func (e *engine) recordCheckpoint(ctx context.Context, rec checkpoint.Recorder, round int) error {
	cp := e.checkpoint(round)
	if e.stop.Load() {
		return context.Cause(ctx)
	}
	if err := rec.Checkpoint(ctx, cp); err != nil {
		return fmt.Errorf("train: checkpoint at round %d: %w", round, err)
	}
	return nil
}

// checkpoint evaluates every replica at w_round.
func (e *engine) checkpoint(round int) *checkpoint.Checkpoint {
	R, m := e.R, e.m
	cp := &checkpoint.Checkpoint{Round: round, Replicas: make([]checkpoint.ReplicaState, R)}
	if e.stats != nil {
		cp.StatNames = e.stats.names
	}
	lossSum := make([]float64, R)
	correct := make([]float64, R)
	// count[r] is the number of samples replica r trained on: its canaries decide its clients'
	// sizes, and under remove-client adjacency C' lacks the target client, whose slot holds
	// C's data only for the per-sample statistics.
	count := make([]int, R)
	for i := 0; i < m; i++ {
		if e.canary.hasVariants(i) {
			for r := 0; r < R; r++ {
				v := e.canary.variant(i, r, false)
				e.evalRows(v, r, 1, 1, lossSum, correct, nil)
				count[r] += v.n
			}
		} else if i == e.target.Client {
			for w := 0; w < 2; w++ {
				if w == 1 && e.target.Absent {
					continue
				}
				e.evalRows(&e.data[w][i], w, e.P, 2, lossSum, correct, nil)
				for r := w; r < R; r += 2 {
					count[r] += e.data[w][i].n
				}
			}
		} else {
			e.evalRows(&e.data[0][i], 0, R, 1, lossSum, correct, nil)
			for r := range count {
				count[r] += e.data[0][i].n
			}
		}
	}
	testCorrect := make([]float64, R)
	if e.test != nil {
		e.evalRows(e.test, 0, R, 1, make([]float64, R), testCorrect, nil)
	}
	var tl, tm [2][]float64
	for w := 0; w < 2; w++ {
		cd := &e.data[w][e.target.Client]
		one := clientData{x: cd.x, y: cd.y, n: 1}
		one.x.Off += e.target.Index * e.dim
		one.x.Rows = 1
		one.y.Off += e.target.Index
		one.y.Rows = 1
		tl[w], tm[w] = make([]float64, R), make([]float64, R)
		e.evalRows(&one, 0, R, 1, tl[w], make([]float64, R), tm[w])
	}
	var records [4][][]float64
	if cs := e.canary; cs != nil {
		cp.CanaryStatNames = e.cfg.Canaries.StatNames()
		if cs.recData != nil {
			records = e.evalCanaryRecords()
		}
	}
	host := make([]float32, e.d)
	for r := 0; r < R; r++ {
		rs := &cp.Replicas[r]
		rs.Pair, rs.World, rs.Seed, rs.Diverged = e.first+r/2, r%2, e.seeds[r], e.diverged[r]
		rs.TrainLoss = lossSum[r] / float64(count[r])
		rs.TestAccuracy = math.NaN()
		if e.test != nil {
			rs.TestAccuracy = testCorrect[r] / float64(e.test.n)
		}
		for w := 0; w < 2; w++ {
			rs.TargetLoss[w], rs.TargetMargin[w] = tl[w][r], tm[w][r]
		}
		if e.stats != nil {
			rs.Stats = e.stats.values(r)
		}
		if e.cfg.RecordParams {
			rs.Params = make([]float32, e.d)
			e.be.Download(rs.Params, e.g, r*e.pitch)
		}
		if cs := e.canary; cs != nil {
			rs.CanaryIn = slices.Clone(cs.bits[r/2])
			if cs.dirs != nil {
				e.be.Download(host, e.g, r*e.pitch)
				rs.CanaryStats = cs.observeDirections(r, host)
			} else {
				rs.CanaryStats = [][]float64{records[0][r], records[1][r], records[2][r], records[3][r]}
			}
		}
		if e.cfg.RecordUpload && round > 0 && e.uploaded[r] {
			e.be.Download(host, e.upload, r*e.pitch)
			rs.Upload = slices.Clone(host)
		}
	}
	return cp
}

// evalRows adds, for replicas first, first+stride, ... (count), the loss and the number of
// correct predictions (margin > 0) over cd's rows to lossSum and correct, and the margins to
// marginSum when it is not nil.
func (e *engine) evalRows(cd *clientData, first, count, stride int, lossSum, correct, marginSum []float64) {
	eb := e.cfg.EvalBatch
	if e.eval.loss == nil {
		e.eval.loss, e.eval.margin = e.be.Alloc(e.R*eb), e.be.Alloc(e.R*eb)
		e.eval.hostLoss, e.eval.hostMargin = make([]float32, e.R*eb), make([]float32, e.R*eb)
	}
	params := e.rows(e.g, first, count, stride)
	for r0 := 0; r0 < cd.n; r0 += eb {
		if e.stop.Load() {
			return // cancelled: the checkpoint is discarded (recordCheckpoint)
		}
		n := min(eb, cd.n-r0)
		x, y := rowRange(cd.x, r0, n), rowRange(cd.y, r0, n)
		loss := compute.Mat{Buf: e.eval.loss, Rows: n, Cols: 1, Stride: 1, Batch: count, BatchStride: n}
		margin := loss
		margin.Buf = e.eval.margin
		e.model.Eval(e.be, e.ws, params, x, y, loss, margin)
		e.be.Download(e.eval.hostLoss[:count*n], e.eval.loss, 0)
		e.be.Download(e.eval.hostMargin[:count*n], e.eval.margin, 0)
		for j := 0; j < count; j++ {
			r := first + j*stride
			for q := 0; q < n; q++ {
				lossSum[r] += float64(e.eval.hostLoss[j*n+q])
				mg := float64(e.eval.hostMargin[j*n+q])
				if mg > 0 {
					correct[r]++
				}
				if marginSum != nil {
					marginSum[r] += mg
				}
			}
		}
	}
}

// rowRange views rows r0..r0+n-1 of every batch element of m (a nil Buf stays nil).
func rowRange(m compute.Mat, r0, n int) compute.Mat {
	if m.Buf != nil {
		m.Off += r0 * m.Stride
		m.Rows = n
	}
	return m
}
