// Package export writes what an experiment directory holds into formats data scientists read
// directly: Parquet files of the run metadata (one row per run and checkpoint, without the
// parameter vectors), the attack scores and the findings, readable by pandas, polars and DuckDB.
// It reads the directory through runs/ and findings.json only, never the Arrow schema.
package export

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/apache/arrow/go/v15/parquet"
	"github.com/apache/arrow/go/v15/parquet/compress"
	"github.com/apache/arrow/go/v15/parquet/pqarrow"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/internal/fsutil"
	"github.com/fedaudit/fedaudit/runs"
)

// File names written into the output directory.
const (
	RunsFile     = "runs.parquet"
	ScoresFile   = "scores.parquet"
	FindingsFile = "findings.parquet"
)

// Parquet writes the Parquet files of experiment directory dir into out (created if needed) and
// returns their paths. Parts the directory does not have yet (no scores, no findings) are skipped,
// but a directory without run files is an error.
func Parquet(ctx context.Context, dir, out string) ([]string, error) {
	var written []string
	rec, err := runsRecord(ctx, dir)
	if err != nil {
		return nil, err // before out is created: a refused export leaves nothing behind
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	if err := writeParquet(filepath.Join(out, RunsFile), rec); err != nil {
		return nil, err
	}
	written = append(written, filepath.Join(out, RunsFile))
	if _, err := os.Stat(expdir.Dir(dir).Scores()); err == nil {
		sf, err := runs.ReadScoreFile(expdir.Dir(dir).Scores())
		if err != nil {
			return nil, err
		}
		if err := writeParquet(filepath.Join(out, ScoresFile), scoresRecord(sf)); err != nil {
			return nil, err
		}
		written = append(written, filepath.Join(out, ScoresFile))
	}
	if raw, err := os.ReadFile(expdir.Dir(dir).Findings()); err == nil {
		rec, err := findingsRecord(raw)
		if err != nil {
			return nil, fmt.Errorf("export: %s: %w", expdir.Dir(dir).Findings(), err)
		}
		if err := writeParquet(filepath.Join(out, FindingsFile), rec); err != nil {
			return nil, err
		}
		written = append(written, filepath.Join(out, FindingsFile))
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return written, nil
}

// writeParquet writes one record as a ZSTD-compressed Parquet file, atomically.
func writeParquet(path string, rec arrow.Record) error {
	defer rec.Release()
	f, err := fsutil.Create(path)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer f.Abort()
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd))
	// The writer closes a sink that is an io.Closer; the file must stay open for Commit.
	w, err := pqarrow.NewFileWriter(rec.Schema(), struct{ io.Writer }{f}, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return fmt.Errorf("export %s: %w", path, err)
	}
	if err := w.Write(rec); err != nil {
		w.Close()
		return fmt.Errorf("export %s: %w", path, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("export %s: %w", path, err)
	}
	return f.Commit()
}

func runsRecord(ctx context.Context, dir string) (arrow.Record, error) {
	tab, err := runs.Open(expdir.Dir(dir).Runs(), runs.AllowPartial())
	if err != nil {
		return nil, err
	}
	defer tab.Close()
	meta := tab.Meta()
	fields := []arrow.Field{
		{Name: "run_id", Type: arrow.PrimitiveTypes.Int64}, {Name: "pair_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "world", Type: arrow.PrimitiveTypes.Int8}, {Name: "seed", Type: arrow.PrimitiveTypes.Uint64},
		{Name: "round", Type: arrow.PrimitiveTypes.Int32}, {Name: "diverged", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "train_loss", Type: arrow.PrimitiveTypes.Float64}, {Name: "test_accuracy", Type: arrow.PrimitiveTypes.Float64},
	}
	for _, s := range meta.StatNames {
		fields = append(fields, arrow.Field{Name: s, Type: arrow.PrimitiveTypes.Float64})
	}
	md := arrow.NewMetadata([]string{runs.KeyConfig, runs.KeyDatasetHash, runs.KeyToolVersion},
		[]string{string(meta.Config), meta.DatasetHash, meta.ToolVersion})
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, &md))
	defer b.Release()
	err = tab.Scan(ctx, func(r runs.Row) error {
		b.Field(0).(*array.Int64Builder).Append(r.RunID)
		b.Field(1).(*array.Int64Builder).Append(r.PairID)
		b.Field(2).(*array.Int8Builder).Append(r.World)
		b.Field(3).(*array.Uint64Builder).Append(r.Seed)
		b.Field(4).(*array.Int32Builder).Append(r.Round)
		b.Field(5).(*array.BooleanBuilder).Append(r.Diverged)
		b.Field(6).(*array.Float64Builder).Append(r.TrainLoss)
		b.Field(7).(*array.Float64Builder).Append(r.TestAccuracy)
		for i, v := range r.Stats {
			b.Field(8 + i).(*array.Float64Builder).Append(v)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b.NewRecord(), nil
}

func scoresRecord(sf *runs.ScoreFile) arrow.Record {
	fields := []arrow.Field{
		{Name: "run_id", Type: arrow.PrimitiveTypes.Int64}, {Name: "pair_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "world", Type: arrow.PrimitiveTypes.Int8}, {Name: "round", Type: arrow.PrimitiveTypes.Int32},
		{Name: "attack", Type: arrow.BinaryTypes.String}, {Name: "threat", Type: arrow.BinaryTypes.String},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64},
	}
	for _, m := range sf.Meta.MetricNames {
		fields = append(fields, arrow.Field{Name: m, Type: arrow.PrimitiveTypes.Float64})
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	for _, s := range sf.Scores {
		b.Field(0).(*array.Int64Builder).Append(s.RunID)
		b.Field(1).(*array.Int64Builder).Append(s.PairID)
		b.Field(2).(*array.Int8Builder).Append(s.World)
		b.Field(3).(*array.Int32Builder).Append(s.Round)
		b.Field(4).(*array.StringBuilder).Append(s.Attack)
		b.Field(5).(*array.StringBuilder).Append(s.Threat)
		b.Field(6).(*array.Float64Builder).Append(s.Score)
		for i := range sf.Meta.MetricNames {
			v := 0.0
			if i < len(s.Metrics) {
				v = s.Metrics[i]
			}
			b.Field(7 + i).(*array.Float64Builder).Append(v)
		}
	}
	return b.NewRecord()
}

// findingsColumns are the types of findings.json's scalar fields (format fedaudit-findings/3,
// findings/finding.go's record) where the JSON value alone cannot give them: its integers
// (round as in runs.parquet and scores.parquet; split_seed a full uint64, which a float64 would
// round above 2^53) and the fields that may be null in every row (no theory, no claim), whose
// column must not vanish. A field not named here is typed by its JSON values.
var findingsColumns = map[string]arrow.DataType{
	"round": arrow.PrimitiveTypes.Int32, "n0": arrow.PrimitiveTypes.Int64, "n1": arrow.PrimitiveTypes.Int64,
	"unpaired": arrow.PrimitiveTypes.Int64, "split_seed": arrow.PrimitiveTypes.Uint64,
	"mu_exact": arrow.PrimitiveTypes.Float64, "mu_convergent": arrow.PrimitiveTypes.Float64,
	"mu_composition": arrow.PrimitiveTypes.Float64, "tightness": arrow.PrimitiveTypes.Float64,
	"verdict": arrow.BinaryTypes.String, "claim_source": arrow.BinaryTypes.String, "claim_kind": arrow.BinaryTypes.String,
}

// findingsRecord turns findings.json (a list of flat objects, or an object with "findings")
// into columns by the JSON types of its fields: strings, numbers (float64, or the integer types
// of findingsColumns; null where absent) and booleans. It reads the file generically so that new
// fields appear without a change here; a new field that is null in every row is a column of
// Arrow's null type.
func findingsRecord(raw []byte) (arrow.Record, error) {
	var list []map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // integers exactly, not through float64
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '{' {
		var obj struct {
			Findings []map[string]any `json:"findings"`
		}
		if err := dec.Decode(&obj); err != nil {
			return nil, err
		}
		list = obj.Findings
	} else if err := dec.Decode(&list); err != nil {
		return nil, err
	}
	for _, f := range list {
		// Format 2 wrote "violated" for a row above an estimate, beside its claim_kind; the
		// export states it as format 3 does, so that a filter on the verdict alone finds only
		// broken claims whatever version wrote the file.
		if f["verdict"] == "violated" && f["claim_kind"] == findings.ClaimEstimate {
			f["verdict"] = findings.VerdictExceedsEstimate
		}
	}
	kinds := map[string]arrow.DataType{}
	var order []string
	for _, f := range list {
		keys := make([]string, 0, len(f))
		for k := range f {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			var t arrow.DataType
			switch f[k].(type) {
			case string:
				t = arrow.BinaryTypes.String
			case json.Number:
				t = arrow.PrimitiveTypes.Float64
				if known, ok := findingsColumns[k]; ok && arrow.IsInteger(known.ID()) {
					t = known
				}
			case bool:
				t = arrow.FixedWidthTypes.Boolean
			case nil:
				t = findingsColumns[k]
				if t == nil {
					t = arrow.Null
				}
				if _, ok := kinds[k]; ok {
					continue // typed by another row
				}
			default:
				continue // nested: not tabular
			}
			old, ok := kinds[k]
			switch {
			case !ok:
				order = append(order, k)
			case arrow.TypeEqual(old, t):
			case old.ID() == arrow.NULL:
				// null so far, typed now
			default:
				return nil, fmt.Errorf("field %q is %s in one finding and %s in another", k, old, t)
			}
			kinds[k] = t
		}
	}
	// The identifying columns first, the rest in name order.
	first := []string{"attack", "threat", "round"}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := slices.Index(first, order[i]), slices.Index(first, order[j])
		if a < 0 {
			a = len(first)
		}
		if b < 0 {
			b = len(first)
		}
		if a != b {
			return a < b
		}
		return order[i] < order[j]
	})
	fields := make([]arrow.Field, len(order))
	for i, k := range order {
		fields[i] = arrow.Field{Name: k, Type: kinds[k], Nullable: true}
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	for row, f := range list {
		for i, k := range order {
			switch v := f[k].(type) {
			case string:
				if kinds[k] == arrow.BinaryTypes.String {
					b.Field(i).(*array.StringBuilder).Append(v)
					continue
				}
			case json.Number:
				var err error
				switch fb := b.Field(i).(type) {
				case *array.Float64Builder:
					var x float64
					if x, err = strconv.ParseFloat(v.String(), 64); err == nil {
						fb.Append(x)
						continue
					}
				case *array.Int32Builder:
					var x int64
					if x, err = strconv.ParseInt(v.String(), 10, 32); err == nil {
						fb.Append(int32(x))
						continue
					}
				case *array.Int64Builder:
					var x int64
					if x, err = strconv.ParseInt(v.String(), 10, 64); err == nil {
						fb.Append(x)
						continue
					}
				case *array.Uint64Builder:
					var x uint64
					if x, err = strconv.ParseUint(v.String(), 10, 64); err == nil {
						fb.Append(x)
						continue
					}
				}
				if err != nil {
					return nil, fmt.Errorf("finding %d: field %q: %s is not a %s", row, k, v, kinds[k])
				}
			case bool:
				if kinds[k] == arrow.FixedWidthTypes.Boolean {
					b.Field(i).(*array.BooleanBuilder).Append(v)
					continue
				}
			}
			b.Field(i).AppendNull()
		}
	}
	return b.NewRecord(), nil
}
