package datasets

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// withSystemDir points the system data directory at dir for one test.
func withSystemDir(t *testing.T, dir string) {
	t.Helper()
	old := systemDataDir
	systemDataDir = dir
	t.Cleanup(func() { systemDataDir = old })
}

// writeIDXPair writes prefix-images-idx3-ubyte and prefix-labels-idx1-ubyte (gzip'd when gz)
// with n samples of 2x2 pixels into dir.
func writeIDXPair(t *testing.T, dir, prefix string, n int, gz bool) (images, labels string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	img := encodeIDX(IDXUint8, []int{n, 2, 2}, pixels(4*n))
	lab := make([]byte, n)
	for i := range lab {
		lab[i] = byte(i % 10)
	}
	lbl := encodeIDX(IDXUint8, []int{n}, lab)
	suffix := ""
	if gz {
		img, lbl, suffix = gzipBytes(t, img), gzipBytes(t, lbl), ".gz"
	}
	return writeFile(t, dir, prefix+"-images-idx3-ubyte"+suffix, img), writeFile(t, dir, prefix+"-labels-idx1-ubyte"+suffix, lbl)
}

func TestOpenNamed(t *testing.T) {
	system := t.TempDir()
	withSystemDir(t, system)
	data := t.TempDir()
	writeIDXPair(t, filepath.Join(system, "fashion-mnist"), "train", 6, true)
	writeIDXPair(t, filepath.Join(data, "fashion-mnist"), "t10k", 3, true)
	writeIDXPair(t, data, "train", 4, false) // dataDir itself holds an MNIST train pair
	cifar := filepath.Join(data, "cifar-10-batches-bin")
	if err := os.MkdirAll(cifar, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		writeFile(t, cifar, "data_batch_"+string(rune('0'+i))+".bin", cifarRecords(byte(i), 0))
	}
	writeFile(t, cifar, "test_batch.bin", cifarRecords(9))

	cases := []struct {
		spec, dataDir string
		name          string
		samples       int
		shape         []int
	}{
		{"fashion-mnist", "", "fashion-mnist:train", 6, []int{1, 2, 2}},         // from the system directory
		{"fashion-mnist:test", data, "fashion-mnist:test", 3, []int{1, 2, 2}},   // from dataDir/<name>
		{"fashion-mnist:train", data, "fashion-mnist:train", 4, []int{1, 2, 2}}, // dataDir comes first
		{"mnist:train", data, "mnist:train", 4, []int{1, 2, 2}},                 // dataDir itself
		{"cifar10", data, "cifar10:train", 10, []int{3, 32, 32}},                // five batches
		{"cifar10:test", data, "cifar10:test", 1, []int{3, 32, 32}},             // one batch
		{"synthetic", "", "synthetic", DefaultSyntheticConfig().N, DefaultSyntheticConfig().Shape},
	}
	for _, c := range cases {
		d, err := Open(c.spec, c.dataDir)
		if err != nil {
			t.Errorf("Open(%q, %q): %v", c.spec, c.dataDir, err)
			continue
		}
		if d.Name != c.name || d.Len() != c.samples || !slices.Equal(d.Shape, c.shape) {
			t.Errorf("Open(%q, %q) = %q with %d samples of shape %v, want %q, %d, %v",
				c.spec, c.dataDir, d.Name, d.Len(), d.Shape, c.name, c.samples, c.shape)
		}
		if err := d.Validate(); err != nil {
			t.Error(err)
		}
	}
	syn, _ := Open("synthetic", "")
	want, _ := Synthetic(DefaultSyntheticConfig())
	if syn.Hash() != want.Hash() {
		t.Error("Open(synthetic) differs from the default synthetic dataset")
	}
}

func TestOpenMissing(t *testing.T) {
	withSystemDir(t, t.TempDir())
	data := t.TempDir()
	writeFile(t, data, "train-images-idx3-ubyte", encodeIDX(IDXUint8, []int{1, 1, 1}, []byte{0}))
	cases := []struct {
		spec, dataDir string
		want          []string
	}{
		{"fashion-mnist", "", []string{"train-images-idx3-ubyte[.gz] not found", "apt-get install dataset-fashion-mnist", "data.data_dir", "--data-dir"}},
		{"fashion-mnist:test", data, []string{"t10k-images-idx3-ubyte", data, "apt-get install dataset-fashion-mnist"}},
		{"mnist", t.TempDir(), []string{"not found", "data.data_dir", "--data-dir"}},
		{"mnist", data, []string{"found " + filepath.Join(data, "train-images-idx3-ubyte") + " but not train-labels-idx1-ubyte"}},
		{"mnist:validation", "", []string{`unknown split "validation"`}},
		{"cifar10", "", []string{"no data directory", "data.data_dir", "--data-dir"}},
		{"cifar10:test", data, []string{"test_batch.bin[.gz] not found", "data.data_dir", "--data-dir"}},
		{"synthetic:test", "", []string{"no splits"}},
	}
	for _, c := range cases {
		_, err := Open(c.spec, c.dataDir)
		if err == nil {
			t.Errorf("Open(%q, %q): no error", c.spec, c.dataDir)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Open(%q, %q): error %q does not say %q", c.spec, c.dataDir, err, w)
			}
		}
	}
}

func TestOpenPath(t *testing.T) {
	dir := t.TempDir()
	images, _ := writeIDXPair(t, dir, "a", 5, true)
	rawImages, _ := writeIDXPair(t, dir, "b", 2, false)
	// Images raw, labels gzip'd: the labels are found with the .gz suffix added.
	mixed := writeFile(t, dir, "c-images-idx3-ubyte", encodeIDX(IDXUint8, []int{1, 2, 2}, pixels(4)))
	writeFile(t, dir, "c-labels-idx1-ubyte.gz", gzipBytes(t, encodeIDX(IDXUint8, []int{1}, []byte{4})))
	cifar := writeFile(t, dir, "batch.bin", cifarRecords(1, 2, 3))
	for path, n := range map[string]int{images: 5, rawImages: 2, mixed: 1, cifar: 3} {
		d, err := Open(path, "")
		if err != nil {
			t.Errorf("Open(%s): %v", path, err)
			continue
		}
		if d.Len() != n || d.Name != filepath.Base(path) {
			t.Errorf("Open(%s): %d samples named %q", path, d.Len(), d.Name)
		}
	}

	noLabels := writeFile(t, dir, "d-images-idx3-ubyte", encodeIDX(IDXUint8, []int{1, 1, 1}, []byte{0}))
	odd := writeFile(t, dir, "pictures", encodeIDX(IDXUint8, []int{1, 1, 1}, []byte{0}))
	text := writeFile(t, dir, "notes.txt", []byte("hello"))
	cases := []struct {
		path string
		want string
	}{
		{filepath.Join(dir, "a-labels-idx1-ubyte.gz"), "probably labels"},
		{noLabels, "its labels file " + filepath.Join(dir, "d-labels-idx1-ubyte") + " (or d-labels-idx1-ubyte.gz) is missing"},
		{odd, "cannot tell where its labels are"},
		{text, text + ": unrecognised format"},
		{dir, "is a directory"},
		{filepath.Join(dir, "nothing"), "no such file, and not a dataset name"},
		{writeFile(t, dir, "bad.bin", []byte{1, 2}), "bad.bin: size mismatch"},
	}
	for _, c := range cases {
		_, err := Open(c.path, "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s): error %v, want one containing %q", c.path, err, c.want)
		}
	}
}

// TestFashionMNIST loads the real data set from Debian's dataset-fashion-mnist package. The
// data set is balanced (6000 training and 1000 test images per class), and the hashes pin the
// exact content the package ships, so a change in the loader's scaling or the package's files
// shows up here. The test hash was reproduced by a separate implementation of the encoding.
func TestFashionMNIST(t *testing.T) {
	dir := filepath.Join(systemDataDir, "fashion-mnist")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("real Fashion-MNIST absent (%v): install it with `apt-get install dataset-fashion-mnist` to run this test", err)
	}
	cases := []struct {
		split  string
		perCls int
		sha256 string
	}{
		{"train", 6000, "1fceec4fdab7090e856134b5a3220a250c3f27b75c4184d89937e4ca9f24697d"},
		{"test", 1000, "931e1b4d7fd2b53f92a23c81b9e361bbe3e71041cc1c4661ea98edee70d77760"},
	}
	for _, c := range cases {
		d, err := Open("fashion-mnist:"+c.split, "")
		if err != nil {
			t.Fatal(err)
		}
		s := d.Summarize()
		if s.Samples != 10*c.perCls || !slices.Equal(s.Shape, []int{1, 28, 28}) || s.Classes != 10 || s.Min != 0 || s.Max != 1 {
			t.Errorf("%s: %+v", c.split, s)
		}
		for k, n := range s.ClassCounts {
			if n != c.perCls {
				t.Errorf("%s: class %d has %d samples, want %d", c.split, k, n, c.perCls)
			}
		}
		if s.SHA256 != c.sha256 {
			t.Errorf("%s: hash %s, want %s", c.split, s.SHA256, c.sha256)
		}
	}
}

// MNIST and Fashion-MNIST share file names: a standard split of the one under the other's name
// is refused (told apart by the mean pixel, 0.13 against 0.29); other sizes are not judged.
func TestOpenRefusesTheOtherMNIST(t *testing.T) {
	withSystemDir(t, t.TempDir())
	write := func(n int, level byte) string {
		dir := t.TempDir()
		writeTestSplit(t, dir, n, level)
		return dir
	}
	mnistLike, fashionLike := write(10000, 134), write(10000, 255) // mean 0.131 and 0.25
	for _, tc := range []struct {
		spec, dir, want string
	}{
		{"fashion-mnist:test", mnistLike, "look like MNIST's, not Fashion-MNIST's (mean pixel 0.131"},
		{"mnist:test", fashionLike, "look like Fashion-MNIST's, not MNIST's (mean pixel 0.250"},
		{"mnist:test", mnistLike, ""},
		{"fashion-mnist:test", fashionLike, ""},
		{"fashion-mnist:test", write(100, 134), ""}, // not a standard split
	} {
		_, err := Open(tc.spec, tc.dir)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Open(%q): %v", tc.spec, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Open(%q): error %v, want one saying %q", tc.spec, err, tc.want)
		}
	}
}

// A named CIFAR-10 split loads from gzip'd batches, as a named MNIST does, and a directory
// where a data file should be is named as such instead of "not found" alone.
func TestOpenNamedGzipAndDirectories(t *testing.T) {
	withSystemDir(t, t.TempDir())
	dir := t.TempDir()
	writeFile(t, dir, "test_batch.bin.gz", gzipBytes(t, cifarRecords(3, 7)))
	d, err := Open("cifar10:test", dir)
	if err != nil || d.Len() != 2 {
		t.Fatalf("cifar10:test from test_batch.bin.gz: %v", err)
	}
	odd := t.TempDir()
	if err := os.Mkdir(filepath.Join(odd, "train-images-idx3-ubyte"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = Open("mnist", odd)
	if want := filepath.Join(odd, "train-images-idx3-ubyte") + " exists but is not a file"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a directory in the images file's place: %v, want %q", err, want)
	}
}

// MNIST in the data directory and Fashion-MNIST in its fashion-mnist subdirectory: each name
// finds its own files, the other dataset's in an earlier place passed over.
func TestOpenSkipsTheOtherMNIST(t *testing.T) {
	withSystemDir(t, t.TempDir())
	dir := t.TempDir()
	writeTestSplit(t, dir, 10000, 134) // MNIST-like, mean 0.131
	if err := os.Mkdir(filepath.Join(dir, "fashion-mnist"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTestSplit(t, filepath.Join(dir, "fashion-mnist"), 10000, 255) // Fashion-like, mean 0.25
	for name, want := range map[string]float32{"mnist:test": 134.0 / 255, "fashion-mnist:test": 1} {
		d, err := Open(name, dir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := d.Features[0]; got != want {
			t.Errorf("%s: first pixel %g, want %g (the files of its own directory)", name, got, want)
		}
	}
}

// writeTestSplit writes an MNIST-format test split of n 28 x 28 images into dir, every fourth
// pixel at level and the others 0 (the mean pixel is level/255/4), with labels 0 to 9 in turn.
func writeTestSplit(t *testing.T, dir string, n int, level byte) {
	t.Helper()
	px := make([]byte, n*28*28)
	for i := 0; i < len(px); i += 4 {
		px[i] = level
	}
	lab := make([]byte, n)
	for i := range lab {
		lab[i] = byte(i % 10)
	}
	writeFile(t, dir, "t10k-images-idx3-ubyte", encodeIDX(IDXUint8, []int{n, 28, 28}, px))
	writeFile(t, dir, "t10k-labels-idx1-ubyte", encodeIDX(IDXUint8, []int{n}, lab))
}
