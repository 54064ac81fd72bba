package datasets

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// systemDataDir is where Debian's dataset packages install their files
// (dataset-fashion-mnist puts the gzip'd IDX files in /usr/share/datasets/fashion-mnist).
// Tests point it elsewhere.
var systemDataDir = "/usr/share/datasets"

// Names lists the dataset names Open knows, for help texts.
func Names() []string {
	return []string{"fashion-mnist[:train|test]", "mnist[:train|test]", "cifar10[:train|test]", "synthetic", "synthetic-images"}
}

// Open opens a dataset by name or path:
//
//   - "fashion-mnist", "mnist" with an optional ":train" (the default) or ":test": the IDX files
//     train-{images-idx3,labels-idx1}-ubyte (t10k-... for test), raw or with .gz, looked for in
//     dataDir, dataDir/<name> and /usr/share/datasets/<name>;
//   - "cifar10" with ":train" (data_batch_1.bin to data_batch_5.bin) or ":test" (test_batch.bin),
//     raw or with .gz, looked for in dataDir, dataDir/cifar-10-batches-bin and dataDir/cifar10;
//   - "synthetic": Synthetic(DefaultSyntheticConfig());
//   - "synthetic-images": SyntheticImages(DefaultSyntheticImageConfig()), 28x28 grey images;
//   - anything else is a path: a CIFAR-10 batch when it ends in .bin (or .bin.gz), otherwise an
//     IDX images file whose labels file lies beside it, named with "images" replaced by "labels"
//     and "idx3" by "idx1" (with or without .gz). Write "./mnist" for a file named like a dataset.
//
// dataDir may be empty. A missing dataset's error says where it was looked for and how to get it.
func Open(spec, dataDir string) (*Dataset, error) {
	name, split, hasSplit := strings.Cut(spec, ":")
	switch name {
	case "fashion-mnist", "mnist", "cifar10":
		if !hasSplit {
			split = "train"
		}
		if split != "train" && split != "test" {
			return nil, fmt.Errorf("dataset %q: unknown split %q (want train or test)", spec, split)
		}
		var d *Dataset
		var err error
		if name == "cifar10" {
			d, err = openCIFAR(split, dataDir)
		} else {
			d, err = openIDXNamed(name, split, dataDir)
		}
		if err != nil {
			return nil, err
		}
		d.Name = name + ":" + split
		return d, nil
	case "synthetic":
		if hasSplit {
			return nil, fmt.Errorf("dataset %q: synthetic has no splits", spec)
		}
		return Synthetic(DefaultSyntheticConfig())
	case "synthetic-images":
		if hasSplit {
			return nil, fmt.Errorf("dataset %q: synthetic-images has no splits", spec)
		}
		return SyntheticImages(DefaultSyntheticImageConfig())
	}
	return openPath(spec)
}

// dataDirHow says how to name the data directory, finishing a missing dataset's error. Open
// serves the experiments, whose config field is data.data_dir, and `audit datasets inspect`,
// whose flag is --data-dir: the one message must fit both, as Open cannot tell its caller.
const dataDirHow = "with data.data_dir in an experiment's config (--data-dir DIR for `audit datasets inspect`)"

func openIDXNamed(name, split, dataDir string) (*Dataset, error) {
	prefix := "train"
	if split == "test" {
		prefix = "t10k"
	}
	var dirs []string
	if dataDir != "" {
		dirs = append(dirs, dataDir, filepath.Join(dataDir, name))
	}
	dirs = append(dirs, filepath.Join(systemDataDir, name))
	images, labels := prefix+"-images-idx3-ubyte", prefix+"-labels-idx1-ubyte"
	var other error // the first directory holding the other dataset's files
	for _, dir := range dirs {
		imagesPath, ok := findFile(dir, images, images+".gz")
		if !ok {
			continue
		}
		labelsPath, ok := findFile(dir, labels, labels+".gz")
		if !ok {
			return nil, fmt.Errorf("dataset %s:%s: found %s but not %s[.gz] beside it", name, split, imagesPath, labels)
		}
		d, err := LoadIDX(imagesPath, labelsPath)
		if err != nil {
			return nil, err
		}
		if err := checkMNISTKind(name, d, dir); err != nil {
			// MNIST in the data directory and Fashion-MNIST in its subdirectory (or the
			// system's): the next place may hold the files asked for.
			if other == nil {
				other = fmt.Errorf("dataset %s:%s: %w", name, split, err)
			}
			continue
		}
		return d, nil
	}
	if other != nil {
		return nil, other
	}
	how := "name a directory that holds the four MNIST IDX files " + dataDirHow
	if name == "fashion-mnist" {
		how = "install Debian's package with `apt-get install dataset-fashion-mnist` (it puts the files in " +
			filepath.Join("/usr/share/datasets", name) + "), or name a directory that holds them " + dataDirHow
	}
	return nil, fmt.Errorf("dataset %s:%s: %s[.gz] not found in %s; %s%s", name, split, images, strings.Join(dirs, ", "), how, notFiles(dirs, images, images+".gz"))
}

// Mean pixel values of the two datasets that share MNIST's file names, over their standard
// splits (MNIST's are the constants of its usual normalisation): far enough apart to tell
// which one a folder holds.
const (
	mnistMeanPixel        = 0.131 // train 0.1307, test 0.1325
	fashionMNISTMeanPixel = 0.286 // train 0.2860, test 0.2868
)

// checkMNISTKind refuses the standard split of one of MNIST and Fashion-MNIST (60,000 or
// 10,000 images of 28 x 28) loaded under the other's name: they use the same file names, so a
// data directory shared between projects could hand an audit of fashion-mnist MNIST's files,
// and its reports would name the wrong data. The mean pixel tells them apart (0.13 against
// 0.29); other sizes (subsets, other data written in the IDX format) are not judged.
func checkMNISTKind(name string, d *Dataset, dir string) error {
	if n := d.Len(); n != 60000 && n != 10000 || len(d.Shape) != 3 || d.Shape[1] != 28 || d.Shape[2] != 28 {
		return nil
	}
	var sum float64
	for _, x := range d.Features {
		sum += float64(x)
	}
	mean := sum / float64(len(d.Features))
	mid := (mnistMeanPixel + fashionMNISTMeanPixel) / 2
	other, want, wantMean := "", "", 0.0
	switch {
	case name == "fashion-mnist" && mean < mid:
		other, want, wantMean = "MNIST's", "Fashion-MNIST's", fashionMNISTMeanPixel
	case name == "mnist" && mean > mid:
		other, want, wantMean = "Fashion-MNIST's", "MNIST's", mnistMeanPixel
	default:
		return nil
	}
	return fmt.Errorf("the files in %s look like %s, not %s (mean pixel %.3f, where %s is %.3f): the two datasets use the same file names; name the directory that holds %s files, or give other IDX data by its path", dir, other, want, mean, want, wantMean, want)
}

// notFiles says which of names exist in dirs but are not regular files (a directory where a
// data file should be), for the end of a not-found error; "" when none.
func notFiles(dirs []string, names ...string) string {
	for _, dir := range dirs {
		for _, n := range names {
			p := filepath.Join(dir, n)
			if st, err := os.Stat(p); err == nil && !st.Mode().IsRegular() {
				return fmt.Sprintf(" (%s exists but is not a file)", p)
			}
		}
	}
	return ""
}

func openCIFAR(split, dataDir string) (*Dataset, error) {
	files := []string{"test_batch.bin"}
	if split == "train" {
		files = []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"}
	}
	how := "name the directory of the CIFAR-10 binary version (cifar-10-batches-bin) " + dataDirHow
	if dataDir == "" {
		return nil, fmt.Errorf("dataset cifar10:%s: no data directory given; %s", split, how)
	}
	dirs := []string{dataDir, filepath.Join(dataDir, "cifar-10-batches-bin"), filepath.Join(dataDir, "cifar10")}
	for _, dir := range dirs {
		if _, ok := findFile(dir, files[0], files[0]+".gz"); !ok {
			continue
		}
		paths := make([]string, len(files))
		for i, f := range files {
			p, ok := findFile(dir, f, f+".gz")
			if !ok {
				return nil, fmt.Errorf("dataset cifar10:%s: %s[.gz] is missing in %s", split, f, dir)
			}
			paths[i] = p
		}
		return LoadCIFAR10(paths...)
	}
	return nil, fmt.Errorf("dataset cifar10:%s: %s[.gz] not found in %s; %s%s", split, files[0], strings.Join(dirs, ", "), how, notFiles(dirs, files[0], files[0]+".gz"))
}

// findFile returns the first of names that is a regular file in dir.
func findFile(dir string, names ...string) (string, bool) {
	for _, n := range names {
		p := filepath.Join(dir, n)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, true
		}
	}
	return "", false
}

func openPath(path string) (*Dataset, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("dataset %q: no such file, and not a dataset name (%s)", path, strings.Join(Names(), ", "))
	}
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("dataset %q is a directory: give an IDX images file, a CIFAR-10 .bin batch or a dataset name", path)
	}
	if strings.HasSuffix(path, ".bin") || strings.HasSuffix(path, ".bin.gz") {
		return LoadCIFAR10(path)
	}
	magic, err := peekMagic(path)
	if err != nil {
		return nil, err
	}
	if len(magic) < 4 || magic[0] != 0 || magic[1] != 0 {
		return nil, fmt.Errorf("%s: unrecognised format: neither an IDX file (it starts with two zero bytes) nor a CIFAR-10 batch (name ending in .bin)", path)
	}
	if magic[3] == 1 {
		return nil, fmt.Errorf("%s: an IDX file of one dimension, probably labels: give the images file instead", path)
	}
	labels, err := labelsBeside(path)
	if err != nil {
		return nil, err
	}
	return LoadIDX(path, labels)
}

// peekMagic returns the first four bytes of the file's (decompressed) content, fewer if it is
// shorter.
func peekMagic(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := maybeGunzip(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var b [4]byte
	n, err := io.ReadFull(r, b[:])
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b[:n], nil
}

// labelsBeside finds the labels file of an IDX images file by the MNIST naming convention.
func labelsBeside(imagesPath string) (string, error) {
	dir, base := filepath.Split(imagesPath)
	want := strings.ReplaceAll(strings.ReplaceAll(base, "images", "labels"), "idx3", "idx1")
	if want == base {
		return "", fmt.Errorf("%s: cannot tell where its labels are: the name contains neither \"images\" nor \"idx3\" to replace by \"labels\" and \"idx1\"", imagesPath)
	}
	alt := want + ".gz"
	if trimmed, ok := strings.CutSuffix(want, ".gz"); ok {
		alt = trimmed
	}
	if p, ok := findFile(dir, want, alt); ok {
		return p, nil
	}
	return "", fmt.Errorf("%s: its labels file %s (or %s) is missing", imagesPath, filepath.Join(dir, want), alt)
}

// SourceBytes estimates the memory a source takes while Open loads it: its stored bytes as
// read (uint8 pixels) and the float32 features made of them, both live until the split copies
// the samples it keeps. Named datasets have their known sizes; a path is sized from its file
// (a gzip file from the uncompressed size its trailer records); synthetic sources, which are
// made at the size the config asks, and files that cannot be read give 0.
func SourceBytes(spec string) int64 {
	name, split, _ := strings.Cut(spec, ":")
	samples := func(train, test int64) int64 {
		if split == "test" {
			return test
		}
		return train
	}
	switch name {
	case "fashion-mnist", "mnist":
		n := samples(60000, 10000)
		return n*784*(1+4) + n*(1+4)
	case "cifar10":
		n := samples(50000, 10000)
		return n*3072*(1+4) + n*(1+4)
	case "synthetic", "synthetic-images":
		return 0
	}
	stored := storedSize(spec)
	if strings.HasSuffix(spec, ".bin") || strings.HasSuffix(spec, ".bin.gz") {
		return 5 * stored
	}
	labels, err := labelsBeside(spec)
	if err != nil {
		return 5 * stored
	}
	return 5 * (stored + storedSize(labels))
}

// storedSize is a file's content size: a gzip file's uncompressed size (its trailer's ISIZE,
// modulo 2^32 as the format keeps it), else its size; 0 where it cannot be read.
func storedSize(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0
	}
	var head [2]byte
	if _, err := f.ReadAt(head[:], 0); err != nil || head != [2]byte{0x1f, 0x8b} || st.Size() < 18 {
		return st.Size()
	}
	var trailer [4]byte
	if _, err := f.ReadAt(trailer[:], st.Size()-4); err != nil {
		return st.Size()
	}
	return int64(binary.LittleEndian.Uint32(trailer[:]))
}
