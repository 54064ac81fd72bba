// Command runsdiff checks that two experiment directories hold the same runs: the same
// experiment (config, dataset hash, statistics, recorded columns) and row for row the same
// values, bit for bit, whatever the sharding. The Slurm test uses it to compare a cluster run
// with a one-process run of the same config.
//
// Usage:
//
//	go run ./deploy/internal/runsdiff DIR_A DIR_B
//
// It exits 0 and prints the row count when the runs match, 1 with the first difference when
// they do not.
package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/runs"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: runsdiff DIR_A DIR_B")
		os.Exit(2)
	}
	n, err := diff(context.Background(), os.Args[1], os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "runsdiff:", err)
		os.Exit(1)
	}
	fmt.Printf("runsdiff: %d rows identical\n", n)
}

// runsDir accepts an experiment directory or its runs/ directory.
func runsDir(dir string) string {
	if st, err := os.Stat(expdir.Dir(dir).Runs()); err == nil && st.IsDir() {
		return expdir.Dir(dir).Runs()
	}
	return dir
}

// readRows reads every row of a complete run directory, ordered by (run, round) so that the
// order files were sharded in does not matter.
func readRows(ctx context.Context, dir string) (runs.Meta, []runs.Row, error) {
	tab, err := runs.Open(runsDir(dir))
	if err != nil {
		return runs.Meta{}, nil, err
	}
	defer tab.Close()
	var rows []runs.Row
	if err := tab.Scan(ctx, func(r runs.Row) error {
		rows = append(rows, r)
		return nil
	}); err != nil {
		return runs.Meta{}, nil, fmt.Errorf("read %s: %w", dir, err)
	}
	slices.SortFunc(rows, func(a, b runs.Row) int {
		if a.RunID != b.RunID {
			return int(a.RunID - b.RunID)
		}
		return int(a.Round - b.Round)
	})
	return tab.Meta(), rows, nil
}

// diff compares the runs of two directories and returns the number of rows.
func diff(ctx context.Context, a, b string) (int, error) {
	ma, ra, err := readRows(ctx, a)
	if err != nil {
		return 0, err
	}
	mb, rb, err := readRows(ctx, b)
	if err != nil {
		return 0, err
	}
	switch {
	case !bytes.Equal(ma.Config, mb.Config):
		return 0, fmt.Errorf("configs differ:\n%s\n%s", ma.Config, mb.Config)
	case ma.DatasetHash != mb.DatasetHash:
		return 0, fmt.Errorf("dataset hashes differ: %s, %s", ma.DatasetHash, mb.DatasetHash)
	case !slices.Equal(ma.StatNames, mb.StatNames):
		return 0, fmt.Errorf("statistics differ: %v, %v", ma.StatNames, mb.StatNames)
	case ma.HasParams != mb.HasParams || ma.HasUpload != mb.HasUpload:
		return 0, fmt.Errorf("recorded columns differ")
	case ma.Canaries != mb.Canaries || !slices.Equal(ma.CanaryStatNames, mb.CanaryStatNames):
		return 0, fmt.Errorf("canary columns differ")
	case len(ra) != len(rb):
		return 0, fmt.Errorf("%s has %d rows, %s has %d", a, len(ra), b, len(rb))
	}
	for i := range ra {
		if why := rowDiff(&ra[i], &rb[i]); why != "" {
			return 0, fmt.Errorf("run %d round %d: %s", ra[i].RunID, ra[i].Round, why)
		}
	}
	return len(ra), nil
}

// rowDiff compares two rows bit for bit (NaN equals NaN of the same bits: a run without a
// test set records NaN accuracy in both).
func rowDiff(a, b *runs.Row) string {
	if a.RunID != b.RunID || a.PairID != b.PairID || a.World != b.World || a.Seed != b.Seed || a.Round != b.Round {
		return fmt.Sprintf("keys differ: %+v vs %+v", keyOf(a), keyOf(b))
	}
	if a.Diverged != b.Diverged {
		return "diverged flags differ"
	}
	f64 := func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) }
	if !f64(a.TrainLoss, b.TrainLoss) || !f64(a.TestAccuracy, b.TestAccuracy) {
		return fmt.Sprintf("loss/accuracy differ: %v/%v vs %v/%v", a.TrainLoss, a.TestAccuracy, b.TrainLoss, b.TestAccuracy)
	}
	if !slices.EqualFunc(a.Stats, b.Stats, f64) {
		return fmt.Sprintf("statistics differ: %v vs %v", a.Stats, b.Stats)
	}
	f32 := func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) }
	if !slices.EqualFunc(a.Params, b.Params, f32) {
		return "params differ"
	}
	if !slices.EqualFunc(a.Upload, b.Upload, f32) {
		return "uploads differ"
	}
	if !slices.Equal(a.CanaryIn, b.CanaryIn) {
		return "canary inclusion bits differ"
	}
	if !slices.EqualFunc(a.CanaryStats, b.CanaryStats, func(x, y []float64) bool { return slices.EqualFunc(x, y, f64) }) {
		return "canary statistics differ"
	}
	return ""
}

func keyOf(r *runs.Row) [5]int64 {
	return [5]int64{r.RunID, r.PairID, int64(r.World), int64(r.Seed), int64(r.Round)}
}
