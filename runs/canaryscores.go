package runs

import (
	"errors"
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/runs/integrity"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// Canary score files hold what the canary attacks make of runs that carry canaries: one score
// per (run, round, attack, canary), with the canary's inclusion bit, for the one-run audits.
// They are separate from score files because their unit is a canary, not a run: a one-run
// audit compares the scores of included and excluded canaries, not the runs of two worlds.

// Names of the columns of a canary score file beyond those it shares with score files.
const (
	colCanary   = "canary"
	colIncluded = "included"
)

var canaryScoreColumns = []string{colRunID, colPairID, colWorld, colRound, colAttack, colThreat, colCanary, colIncluded, colScore}

// CanaryScore is a canary attack's score of one canary of one run at one round. Higher Score
// means the attack believes more strongly that the canary was included in the run.
type CanaryScore struct {
	RunID  int64
	PairID int64
	World  int8 // the run's world (WorldC or WorldCPrime)
	Round  int32
	Attack string
	Threat string
	Canary int32 // the canary's index, 0..k-1
	// Included is the canary's true inclusion bit in this run.
	Included bool
	Score    float64
}

// CanaryScoreFile is a canary score file as read.
type CanaryScoreFile struct {
	Meta   ScoreMeta // MetricNames is always empty
	Scores []CanaryScore
}

func canaryScoreSchema(m ScoreMeta) (*arrow.Schema, error) {
	if len(m.MetricNames) > 0 {
		return nil, errors.New("canary score files have no metric columns")
	}
	config, err := compactConfig(m.Config, false)
	if err != nil {
		return nil, err
	}
	fields := []arrow.Field{
		{Name: colRunID, Type: arrow.PrimitiveTypes.Int64},
		{Name: colPairID, Type: arrow.PrimitiveTypes.Int64},
		{Name: colWorld, Type: arrow.PrimitiveTypes.Int8},
		{Name: colRound, Type: arrow.PrimitiveTypes.Int32},
		{Name: colAttack, Type: arrow.BinaryTypes.String},
		{Name: colThreat, Type: arrow.BinaryTypes.String},
		{Name: colCanary, Type: arrow.PrimitiveTypes.Int32},
		{Name: colIncluded, Type: arrow.FixedWidthTypes.Boolean},
		{Name: colScore, Type: arrow.PrimitiveTypes.Float64},
	}
	md := arrow.NewMetadata(
		[]string{KeyFormatVersion, KeyKind, KeyConfig, KeyDatasetHash, KeyToolVersion},
		[]string{FormatVersion, KindCanaryScores, string(config), m.DatasetHash, m.ToolVersion},
	)
	return arrow.NewSchema(fields, &md), nil
}

// CanaryScoreWriter writes one canary score file; the file appears only on a successful Close.
type CanaryScoreWriter struct {
	fw *fileWriter
}

// CreateCanaryScores starts a canary score file at path.
func CreateCanaryScores(path string, meta ScoreMeta, opts ...Option) (*CanaryScoreWriter, error) {
	schema, err := canaryScoreSchema(meta)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	fw, err := newFileWriter(path, schema, newOptions(opts))
	if err != nil {
		return nil, err
	}
	return &CanaryScoreWriter{fw: fw}, nil
}

// Write appends scores; on a validation error none of them is written.
func (w *CanaryScoreWriter) Write(scores ...CanaryScore) error {
	if err := w.fw.usable(); err != nil {
		return err
	}
	for i, s := range scores {
		if err := checkCanaryScore(s); err != nil {
			return fmt.Errorf("write %s: canary score %d (run %d, round %d, canary %d): %w", w.fw.path, i, s.RunID, s.Round, s.Canary, err)
		}
	}
	b := w.fw.b
	for _, s := range scores {
		b.Field(0).(*array.Int64Builder).Append(s.RunID)
		b.Field(1).(*array.Int64Builder).Append(s.PairID)
		b.Field(2).(*array.Int8Builder).Append(s.World)
		b.Field(3).(*array.Int32Builder).Append(s.Round)
		b.Field(4).(*array.StringBuilder).Append(s.Attack)
		b.Field(5).(*array.StringBuilder).Append(s.Threat)
		b.Field(6).(*array.Int32Builder).Append(s.Canary)
		b.Field(7).(*array.BooleanBuilder).Append(s.Included)
		b.Field(8).(*array.Float64Builder).Append(s.Score)
		if err := w.fw.added(40 + len(s.Attack) + len(s.Threat)); err != nil {
			return err
		}
	}
	return nil
}

func checkCanaryScore(s CanaryScore) error {
	switch {
	case s.World != WorldC && s.World != WorldCPrime:
		return fmt.Errorf("world %d, want 0 (C) or 1 (C')", s.World)
	case math.IsNaN(s.Score):
		return errors.New("score is NaN")
	case s.Attack == "":
		return errors.New("empty attack name")
	case s.Threat != ThreatFinal && s.Threat != ThreatAllIterates:
		return fmt.Errorf("threat model %q, want %q or %q", s.Threat, ThreatFinal, ThreatAllIterates)
	case s.Canary < 0:
		return fmt.Errorf("canary index %d is negative", s.Canary)
	}
	return nil
}

// Close completes the file and moves it into place.
func (w *CanaryScoreWriter) Close() error { return w.fw.close() }

// Abort discards the file. It does nothing after Close.
func (w *CanaryScoreWriter) Abort() error { return w.fw.abort() }

// ReadCanaryScores reads a canary score file written by CreateCanaryScores, verifying its
// checksums batch by batch.
func ReadCanaryScores(path string) (*CanaryScoreFile, error) {
	sf, err := readCanaryScores(path)
	if err != nil {
		return nil, fmt.Errorf("read canary scores %s: %w", path, err)
	}
	return sf, nil
}

func readCanaryScores(path string) (*CanaryScoreFile, error) {
	af, err := openArrowFile(path, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	defer af.Close()
	r := af.Reader()
	sc := r.Schema()
	var sf CanaryScoreFile
	if sf.Meta.Config, sf.Meta.DatasetHash, sf.Meta.ToolVersion, err = commonMeta(sc, KindCanaryScores); err != nil {
		return nil, err
	}
	idx := make([]int, len(canaryScoreColumns))
	for j, name := range canaryScoreColumns {
		idx[j] = -1
		for i, f := range sc.Fields() {
			if f.Name == name {
				idx[j] = i
			}
		}
		if idx[j] < 0 {
			return nil, fmt.Errorf("missing required column %q", name)
		}
	}
	base := 0
	for i := 0; i < r.NumRecords(); i++ {
		if err := af.VerifyBatch(i); err != nil {
			return nil, fmt.Errorf("batch %d: %w", i, err)
		}
		err := integrity.DecodeSafely(func() error {
			rec, err := r.RecordAt(i)
			if err != nil {
				return err
			}
			defer rec.Release()
			sf.Scores, err = appendCanaryScores(sf.Scores, rec, idx, base)
			base += int(rec.NumRows())
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("batch %d: %w", i, err)
		}
	}
	// A score file is read whole: its bytes outside the record batches are checked too (the
	// whole-file checksum), so that a damaged file is scored again, never used.
	if err := af.VerifyRest(); err != nil {
		return nil, err
	}
	return &sf, nil
}

// appendCanaryScores decodes one batch, column by column through the checked accessors of
// score files, so that a damaged or foreign batch is an error and never a crash.
func appendCanaryScores(out []CanaryScore, rec arrow.Record, idx []int, base int) ([]CanaryScore, error) {
	n := int(rec.NumRows())
	for _, i := range idx {
		if rec.Column(i).Len() != n {
			return nil, fmt.Errorf("column %q has %d values for %d rows", rec.ColumnName(i), rec.Column(i).Len(), n)
		}
	}
	col := func(j int) arrow.Array { return rec.Column(idx[j]) }
	included, ok := col(7).(*array.Boolean)
	if !ok {
		return nil, fmt.Errorf("column %q is not boolean", colIncluded)
	}
	for k := 0; k < n; k++ {
		var s CanaryScore
		var world, canary, round int64
		var err error
		step := func(j int, f func() error) {
			if err == nil {
				if e := f(); e != nil {
					err = fmt.Errorf("column %s: %w", canaryScoreColumns[j], e)
				}
			}
		}
		step(0, func() (e error) { s.RunID, e = intAt(col(0), k, math.MinInt64, math.MaxInt64); return })
		step(1, func() (e error) { s.PairID, e = intAt(col(1), k, math.MinInt64, math.MaxInt64); return })
		step(2, func() (e error) { world, e = intAt(col(2), k, 0, 1); return })
		step(3, func() (e error) { round, e = intAt(col(3), k, math.MinInt32, math.MaxInt32); return })
		step(4, func() (e error) { s.Attack, e = stringAt(col(4), k); return })
		step(5, func() (e error) { s.Threat, e = stringAt(col(5), k); return })
		step(6, func() (e error) { canary, e = intAt(col(6), k, 0, math.MaxInt32); return })
		step(7, func() error {
			if included.IsNull(k) {
				return errors.New("null value")
			}
			s.Included = included.Value(k)
			return nil
		})
		step(8, func() (e error) { s.Score, e = floatAt(col(8), k); return })
		s.World, s.Round, s.Canary = int8(world), int32(round), int32(canary)
		if err == nil {
			err = checkCanaryScore(s)
		}
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", base+k, err)
		}
		out = append(out, s)
	}
	return out, nil
}
