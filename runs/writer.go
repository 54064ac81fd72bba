package runs

import (
	"errors"
	"fmt"

	"github.com/apache/arrow/go/v15/arrow/array"
)

// Writer writes one run file. Rows are buffered into record batches; the file appears at its
// path only when Close succeeds. The usual pattern is
//
//	w, err := runs.Create(path, meta)
//	if err != nil { ... }
//	defer w.Abort() // no-op after a successful Close
//	... w.Write(rows...) ...
//	return w.Close()
//
// A Writer is not safe for concurrent use.
type Writer struct {
	fw    *fileWriter
	meta  Meta
	nstat int
	// Lengths of params and upload fixed by the first row; -1 before it. All checkpoints of one
	// experiment have the same model, so a change of length is a bug in the writer's caller.
	paramLen, uploadLen int
}

// Create starts a run file at path. meta.Config must be valid JSON; StatNames must be unique and
// distinct from the fixed column names.
func Create(path string, meta Meta, opts ...Option) (*Writer, error) {
	schema, err := runSchema(meta)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	fw, err := newFileWriter(path, schema, newOptions(opts))
	if err != nil {
		return nil, err
	}
	config, _ := schema.Metadata().GetValue(KeyConfig)
	meta.Config = []byte(config)
	meta.Shard = meta.Shard.normalized()
	return &Writer{fw: fw, meta: meta, nstat: len(meta.StatNames), paramLen: -1, uploadLen: -1}, nil
}

// Meta returns the metadata the file is written with (config compacted, shard normalized).
func (w *Writer) Meta() Meta { return w.meta }

// Write appends rows. Either all rows of a call are accepted or, on a validation error, none.
func (w *Writer) Write(rows ...Row) error {
	if err := w.fw.usable(); err != nil {
		return err
	}
	paramLen, uploadLen := w.paramLen, w.uploadLen
	for i := range rows {
		if err := w.check(&rows[i], &paramLen, &uploadLen); err != nil {
			return fmt.Errorf("write %s: row %d (run %d, round %d): %w", w.fw.path, i, rows[i].RunID, rows[i].Round, err)
		}
	}
	w.paramLen, w.uploadLen = paramLen, uploadLen
	for i := range rows {
		size := w.append(&rows[i])
		if err := w.fw.added(size); err != nil {
			return err
		}
	}
	return nil
}

func (w *Writer) check(r *Row, paramLen, uploadLen *int) error {
	if r.World != WorldC && r.World != WorldCPrime {
		return fmt.Errorf("world %d, want 0 (C) or 1 (C')", r.World)
	}
	if len(r.Stats) != w.nstat {
		return fmt.Errorf("%d statistics, the file declares %d %v", len(r.Stats), w.nstat, w.meta.StatNames)
	}
	if err := checkVector("params", r.Params, w.meta.HasParams, paramLen); err != nil {
		return err
	}
	if err := checkVector("upload", r.Upload, w.meta.HasUpload, uploadLen); err != nil {
		return err
	}
	return w.checkCanaries(r)
}

// checkCanaries checks that a row carries k inclusion bits and k values per canary statistic
// exactly when the file declares k canaries.
func (w *Writer) checkCanaries(r *Row) error {
	k := w.meta.Canaries
	if k == 0 {
		if len(r.CanaryIn) > 0 || len(r.CanaryStats) > 0 {
			return errors.New("row has canary columns but the file declares no canaries")
		}
		return nil
	}
	if len(r.CanaryIn) != k {
		return fmt.Errorf("%d canary inclusion bits, the file declares %d canaries", len(r.CanaryIn), k)
	}
	if len(r.CanaryStats) != len(w.meta.CanaryStatNames) {
		return fmt.Errorf("%d canary statistics, the file declares %d %v", len(r.CanaryStats), len(w.meta.CanaryStatNames), w.meta.CanaryStatNames)
	}
	for j, v := range r.CanaryStats {
		if len(v) != k {
			return fmt.Errorf("canary statistic %s has %d values for %d canaries", w.meta.CanaryStatNames[j], len(v), k)
		}
	}
	return nil
}

func checkVector(name string, v []float32, declared bool, want *int) error {
	switch {
	case !declared && len(v) > 0:
		return fmt.Errorf("row has %s but the file does not declare them", name)
	case !declared:
		return nil
	case len(v) == 0:
		return fmt.Errorf("row has no %s but the file declares them", name)
	case *want < 0:
		*want = len(v)
	case len(v) != *want:
		return fmt.Errorf("%s has length %d, earlier rows %d", name, len(v), *want)
	}
	return nil
}

// append adds one validated row to the batch builder and returns its approximate size in bytes.
func (w *Writer) append(r *Row) int {
	b := w.fw.b
	b.Field(0).(*array.Int64Builder).Append(r.RunID)
	b.Field(1).(*array.Int64Builder).Append(r.PairID)
	b.Field(2).(*array.Int8Builder).Append(r.World)
	b.Field(3).(*array.Uint64Builder).Append(r.Seed)
	b.Field(4).(*array.Int32Builder).Append(r.Round)
	b.Field(5).(*array.BooleanBuilder).Append(r.Diverged)
	b.Field(6).(*array.Float64Builder).Append(r.TrainLoss)
	b.Field(7).(*array.Float64Builder).Append(r.TestAccuracy)
	col := 8
	for _, s := range r.Stats {
		b.Field(col).(*array.Float64Builder).Append(s)
		col++
	}
	size := 8*(col-1) + 1
	for _, v := range [][]float32{r.Params, r.Upload} {
		if len(v) == 0 {
			continue
		}
		lb := b.Field(col).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.Float32Builder).AppendValues(v, nil)
		size += 4*len(v) + 4
		col++
	}
	if w.meta.Canaries > 0 {
		lb := b.Field(col).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.BooleanBuilder).AppendValues(r.CanaryIn, nil)
		col++
		for _, v := range r.CanaryStats {
			lb := b.Field(col).(*array.ListBuilder)
			lb.Append(true)
			lb.ValueBuilder().(*array.Float64Builder).AppendValues(v, nil)
			size += 8*len(v) + 4
			col++
		}
		size += len(r.CanaryIn) + 4
	}
	return size
}

// Close completes the file and moves it into place.
func (w *Writer) Close() error { return w.fw.close() }

// Abort discards the file. It does nothing after Close.
func (w *Writer) Abort() error { return w.fw.abort() }
