package cublasdl

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Sonames are the names Load tries, newest first: a node's toolkit provides one of them
// (CUDA 13, 12, 11), and the unversioned name covers a development install or a symlink.
var Sonames = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"}

// LoaderSearch is Library.Source for a library found by the dynamic loader's own search.
const LoaderSearch = "the dynamic loader's search (LD_LIBRARY_PATH, the ld.so cache, the system directories)"

// A Place is a directory Load searches for cuBLAS when the dynamic loader's own search finds
// none of Sonames: where CUDA toolkits and NVIDIA's Python wheels put it.
type Place struct {
	Dir    string // the directory
	Origin string // why it is searched, e.g. "$CUDA_HOME/lib64" or "Python wheel nvidia-cublas"
}

// A Candidate is a cuBLAS file found in a Place.
type Candidate struct {
	Path  string
	Place Place
}

// searchEnv is what the search reads: the environment and the file system, replaced in tests.
type searchEnv struct {
	loader []string // the names for the dynamic loader's own search (Sonames)
	getenv func(string) string
	glob   func(string) ([]string, error)
	isFile func(string) bool
}

func osEnv() searchEnv {
	return searchEnv{loader: Sonames, getenv: os.Getenv, glob: filepath.Glob, isFile: func(p string) bool {
		st, err := os.Stat(p) // follows symlinks, as dlopen does
		return err == nil && st.Mode().IsRegular()
	}}
}

// places lists the directories to search, most specific first, without duplicates:
// $CUDA_HOME/lib64 and $CUDA_PATH/lib64 (a toolkit the user chose), /usr/local/cuda/lib64 (the
// default install), /usr/local/cuda-X.Y/lib64 newest version first (several toolkits side by
// side), $CONDA_PREFIX/lib (conda's cuda-libraries), then the lib folder of NVIDIA's Python
// wheels (nvidia/cublas/lib for nvidia-cublas-cu11 and -cu12, nvidia/cu13/lib for CUDA 13's
// nvidia-cublas) under every site-packages a Python would use: the active virtual environment's
// and conda environment's, PYTHONPATH's entries, the user's, /usr/local's and the system's.
func places(e searchEnv) []Place {
	var out []Place
	seen := map[string]bool{}
	add := func(dir, origin string) {
		if dir == "" {
			return
		}
		dir = filepath.Clean(dir)
		if !seen[dir] {
			seen[dir] = true
			out = append(out, Place{dir, origin})
		}
	}
	for _, v := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if d := e.getenv(v); d != "" {
			add(filepath.Join(d, "lib64"), "$"+v+"/lib64")
		}
	}
	add("/usr/local/cuda/lib64", "the default CUDA install")
	versions, _ := e.glob("/usr/local/cuda-*/lib64")
	slices.SortStableFunc(versions, func(a, b string) int { return compareVersions(cudaVersion(b), cudaVersion(a)) })
	for _, d := range versions {
		add(d, "a CUDA "+strings.Join(cudaVersionText(d), ".")+" install")
	}
	if d := e.getenv("CONDA_PREFIX"); d != "" {
		add(filepath.Join(d, "lib"), "$CONDA_PREFIX/lib")
	}
	var sites []string
	glob := func(pattern string) {
		m, _ := e.glob(pattern)
		slices.Sort(m)
		slices.Reverse(m) // python3.12 before python3.11 (the newer Python first)
		sites = append(sites, m...)
	}
	for _, v := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if d := e.getenv(v); d != "" {
			glob(filepath.Join(d, "lib", "python3*", "site-packages"))
		}
	}
	for _, p := range filepath.SplitList(e.getenv("PYTHONPATH")) {
		if p != "" {
			sites = append(sites, p)
		}
	}
	if h := e.getenv("HOME"); h != "" {
		glob(filepath.Join(h, ".local", "lib", "python3*", "site-packages"))
	}
	glob("/usr/local/lib/python3*/dist-packages")
	glob("/usr/local/lib/python3*/site-packages")
	sites = append(sites, "/usr/lib/python3/dist-packages")
	glob("/usr/lib/python3*/site-packages")
	for _, s := range sites {
		add(filepath.Join(s, "nvidia", "cublas", "lib"), "Python wheel nvidia-cublas")
		add(filepath.Join(s, "nvidia", "cu13", "lib"), "Python wheel nvidia-cublas (CUDA 13)")
	}
	return out
}

// candidates lists the cuBLAS files in the places, in the order Load tries them: place by
// place, and in each the sonames newest first.
func candidates(e searchEnv) []Candidate {
	var out []Candidate
	for _, p := range places(e) {
		for _, n := range Sonames {
			if f := filepath.Join(p.Dir, n); e.isFile(f) {
				out = append(out, Candidate{f, p})
			}
		}
	}
	return out
}

// cudaVersionText is the version in a /usr/local/cuda-X.Y/lib64 path, as its parts.
func cudaVersionText(dir string) []string {
	v := strings.TrimPrefix(filepath.Base(filepath.Dir(dir)), "cuda-")
	return strings.Split(v, ".")
}

func cudaVersion(dir string) []int {
	var out []int
	for _, p := range cudaVersionText(dir) {
		n, err := strconv.Atoi(p)
		if err != nil {
			n = -1
		}
		out = append(out, n)
	}
	return out
}

func compareVersions(a, b []int) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] - b[i]
		}
	}
	return len(a) - len(b)
}
