package datasets

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// CIFAR-10's binary format: records of one label byte then 32x32 pixels of the red, green and
// blue planes in turn (so a sample is already channels-first).
const (
	cifarSide   = 32
	cifarPixels = 3 * cifarSide * cifarSide
	cifarRecord = 1 + cifarPixels
)

// ReadCIFAR10 parses one CIFAR-10 binary batch from r, raw or gzip-compressed (recognised by
// its magic bytes). The stream must hold a whole number of 3073-byte records, at most maxBytes
// in all, each with a label below 10. Pixels are scaled to [0, 1]; a sample has shape
// [3 32 32].
func ReadCIFAR10(r io.Reader, maxBytes int64) (*Dataset, error) {
	r, err := maybeGunzip(r)
	if err != nil {
		return nil, err
	}
	// Read one byte past the limit to tell "exactly at the limit" from "over it".
	raw, err := io.ReadAll(io.LimitReader(r, min(maxBytes, math.MaxInt64-1)+1))
	if err != nil {
		return nil, fmt.Errorf("read data: %w", err)
	}
	if int64(len(raw)) > maxBytes {
		return nil, fmt.Errorf("more than the limit of %d bytes", maxBytes)
	}
	if len(raw) == 0 {
		return nil, errors.New("empty: no records")
	}
	if extra := len(raw) % cifarRecord; extra != 0 {
		return nil, fmt.Errorf("size mismatch: %d bytes is %d whole %d-byte records and a truncated one of %d bytes",
			len(raw), len(raw)/cifarRecord, cifarRecord, extra)
	}
	n := len(raw) / cifarRecord
	d := &Dataset{
		Shape:    []int{3, cifarSide, cifarSide},
		Classes:  MNISTClasses,
		Features: make([]float32, n*cifarPixels),
		Labels:   make([]int32, n),
	}
	for i := range n {
		rec := raw[i*cifarRecord : (i+1)*cifarRecord]
		if rec[0] >= MNISTClasses {
			return nil, fmt.Errorf("record %d has label %d, outside [0, %d)", i, rec[0], MNISTClasses)
		}
		d.Labels[i] = int32(rec[0])
		out := d.Features[i*cifarPixels : (i+1)*cifarPixels]
		for j, b := range rec[1:] {
			out[j] = byteScale[b]
		}
	}
	return d, nil
}

// LoadCIFAR10 loads and concatenates CIFAR-10 binary batches (data_batch_1.bin ... or
// test_batch.bin). Errors name the file at fault.
func LoadCIFAR10(paths ...string) (*Dataset, error) {
	if len(paths) == 0 {
		return nil, errors.New("load CIFAR-10: no files given")
	}
	var all *Dataset
	for _, path := range paths {
		d, err := readCIFARFile(path)
		if err != nil {
			return nil, err
		}
		if all == nil {
			all = d
			continue
		}
		all.Features = append(all.Features, d.Features...)
		all.Labels = append(all.Labels, d.Labels...)
	}
	all.Name = "cifar10"
	if len(paths) == 1 {
		all.Name = filepath.Base(paths[0])
	}
	return all, nil
}

func readCIFARFile(path string) (*Dataset, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d, err := ReadCIFAR10(f, DefaultMaxBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}
