// Package dataexport writes an experiment's adjacent datasets, every client of world C and of
// world C' with labels, the position of the sample where they differ and the test set, as one
// .npz or .safetensors file, so that a trainer outside fedaudit (PyTorch, JAX, ...) trains on
// exactly the clients fedaudit's own trainer and `audit import` assume. `audit datasets export`
// is its command; package ingest owns the byte formats and reads the files back.
package dataexport

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/ingest"
	"github.com/fedaudit/fedaudit/internal/fsutil"
)

// FormatVersion names the layout below; safetensors files record it in their metadata.
const FormatVersion = "fedaudit-datasets-v1"

// Format is a file format Write chooses by the path's extension.
type Format string

const (
	NPZ         Format = "npz"
	Safetensors Format = "safetensors"
)

// FormatOf tells the format from the path's extension (.npz or .safetensors, any case).
func FormatOf(path string) (Format, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".npz":
		return NPZ, nil
	case ".safetensors":
		return Safetensors, nil
	}
	return "", fmt.Errorf("%q: the extension must be .npz or .safetensors (it chooses the format)", path)
}

// Tensors lays out the data as named tensors, in this order:
//
//	classes                  int64 scalar: the number of label values
//	c/client<i>/x            float32 [n_i, sample shape...]: client i's features in world C
//	c/client<i>/y            int64 [n_i]: its labels
//	cprime/client<i>/x, /y   the same in world C' (under remove-client C' has no client <c>:
//	                         clients keep their numbers in both worlds)
//	canary/client            int64 scalar: the client whose data differs
//	canary/index             int64 scalar: the sample where it differs, an index into
//	                         cprime/client<c> for replace and add, into c/client<c> for
//	                         remove; for replace-client and remove-client the whole client
//	                         differs and it is the sample the trainer records
//	test/x, test/y           the held-out test set, when the config has test samples
//
// Features and labels are the experiment's own slices converted only in the labels' width
// (int32 to int64): every value is bit for bit what spec.Prepare gives the trainer.
func Tensors(d *spec.Data) []ingest.Tensor {
	scalar := func(name string, v int) ingest.Tensor {
		return ingest.Tensor{Name: name, Shape: []int{}, Integer: true, Ints: []int64{int64(v)}}
	}
	out := []ingest.Tensor{scalar("classes", d.Classes)}
	for i, c := range d.Pair.C {
		out = append(out, client("c/client"+strconv.Itoa(i), c)...)
	}
	for j, c := range d.Pair.CPrime {
		i := j
		if len(d.Pair.CPrime) < len(d.Pair.C) && j >= d.Pair.Client { // remove-client
			i = j + 1
		}
		out = append(out, client("cprime/client"+strconv.Itoa(i), c)...)
	}
	out = append(out, scalar("canary/client", d.Target.Client), scalar("canary/index", d.Target.Index))
	if d.Test != nil {
		out = append(out, client("test", d.Test)...)
	}
	return out
}

// client is the x and y tensors of one dataset under prefix.
func client(prefix string, c *datasets.Dataset) []ingest.Tensor {
	n := c.Len()
	y := make([]int64, n)
	for k, l := range c.Labels {
		y[k] = int64(l)
	}
	return []ingest.Tensor{
		{Name: prefix + "/x", Shape: append([]int{n}, c.Shape...), Data: c.Features[:n*c.Dim()]},
		{Name: prefix + "/y", Shape: []int{n}, Integer: true, Ints: y},
	}
}

// Metadata is what a safetensors file records beside the tensors (an .npz has no place for it).
func Metadata(cfg *spec.Config, d *spec.Data) map[string]string {
	return map[string]string{
		"format":    FormatVersion,
		"config":    cfg.Name,
		"seed":      strconv.FormatUint(cfg.Seed, 10),
		"source":    cfg.Data.Source,
		"adjacency": cfg.Adjacency.Kind,
		"data_hash": d.Hash,
	}
}

// Write writes the data to path in the format its extension names. The file appears whole or
// not at all: it is written to a temporary file beside path and renamed into place; a cancelled
// ctx stops the writing and removes the temporary file.
func Write(ctx context.Context, path string, cfg *spec.Config, d *spec.Data) error {
	format, err := FormatOf(path)
	if err != nil {
		return err
	}
	// A crafted gradient or update is made by the trainer, not held in the data: the exported
	// worlds would not differ where the experiment's do.
	if cfg.Train.GradientCanary != nil || cfg.Train.CraftedUpdate != nil {
		return fmt.Errorf("write %s: the worlds of experiment %q differ by a crafted gradient or client update that fedaudit's trainer makes (adjacency kind gradient, adjacency.crafted_update), not by data: an external trainer cannot reproduce it from exported data", path, cfg.Name)
	}
	// fsutil's temporary file holds its lock while it is written, so that a cleaner of stale
	// temporary files (fsutil.CleanStale) in the same folder leaves it alone.
	tmp, err := fsutil.Create(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("write %s: cannot create a file in %s: %w", path, filepath.Dir(path), err)
	}
	defer tmp.Abort()
	w := &ctxWriter{ctx: ctx, f: tmp.File}
	ts := Tensors(d)
	switch format {
	case NPZ:
		err = ingest.WriteNPZ(w, ts)
	case Safetensors:
		err = ingest.WriteSafetensorsTo(w, ts, Metadata(cfg, d))
	}
	if err == nil {
		err = tmp.Commit()
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

type ctxWriter struct {
	ctx context.Context
	f   *os.File
}

func (w *ctxWriter) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	return w.f.Write(p)
}
