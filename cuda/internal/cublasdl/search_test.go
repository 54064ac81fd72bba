package cublasdl

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeEnv is a searchEnv over the file tree under root (absolute paths are taken inside it)
// with the given environment.
func fakeEnv(t *testing.T, root string, env map[string]string) searchEnv {
	t.Helper()
	return searchEnv{
		loader: Sonames,
		getenv: func(k string) string { return env[k] },
		glob: func(p string) ([]string, error) {
			m, err := filepath.Glob(filepath.Join(root, p))
			for i := range m {
				m[i] = "/" + strings.TrimPrefix(strings.TrimPrefix(m[i], root), "/")
			}
			return m, err
		},
		isFile: func(p string) bool {
			st, err := os.Stat(filepath.Join(root, p))
			return err == nil && st.Mode().IsRegular()
		},
	}
}

// tree makes the files (paths relative to root; a trailing slash makes a directory).
func tree(t *testing.T, root string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(root, f)
		if strings.HasSuffix(f, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func dirs(ps []Place) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Dir)
	}
	return out
}

// The directories searched after the loader's own search, in order: the user's toolkit
// ($CUDA_HOME, $CUDA_PATH), the default install, versioned installs newest first (12.10 after
// 13.0 and before 12.4), conda, then the wheels' lib folders under every site-packages.
func TestSearchPlaces(t *testing.T) {
	root := t.TempDir()
	tree(t, root, "usr/local/cuda-11.8/lib64/", "usr/local/cuda-12.4/lib64/", "usr/local/cuda-12.10/lib64/",
		"usr/local/cuda-13.0/lib64/", "venv/lib/python3.11/site-packages/", "venv/lib/python3.12/site-packages/",
		"home/u/.local/lib/python3.11/site-packages/", "usr/local/lib/python3.11/dist-packages/")
	e := fakeEnv(t, root, map[string]string{"CUDA_HOME": "/opt/cuda", "CUDA_PATH": "/opt/cuda/", "VIRTUAL_ENV": "/venv",
		"HOME": "/home/u", "PYTHONPATH": "/pp:", "CONDA_PREFIX": "/conda"})
	got := dirs(places(e))
	want := []string{
		"/opt/cuda/lib64", "/usr/local/cuda/lib64",
		"/usr/local/cuda-13.0/lib64", "/usr/local/cuda-12.10/lib64", "/usr/local/cuda-12.4/lib64", "/usr/local/cuda-11.8/lib64",
		"/conda/lib",
		"/venv/lib/python3.12/site-packages/nvidia/cublas/lib", "/venv/lib/python3.12/site-packages/nvidia/cu13/lib",
		"/venv/lib/python3.11/site-packages/nvidia/cublas/lib", "/venv/lib/python3.11/site-packages/nvidia/cu13/lib",
		"/pp/nvidia/cublas/lib", "/pp/nvidia/cu13/lib",
		"/home/u/.local/lib/python3.11/site-packages/nvidia/cublas/lib", "/home/u/.local/lib/python3.11/site-packages/nvidia/cu13/lib",
		"/usr/local/lib/python3.11/dist-packages/nvidia/cublas/lib", "/usr/local/lib/python3.11/dist-packages/nvidia/cu13/lib",
		"/usr/lib/python3/dist-packages/nvidia/cublas/lib", "/usr/lib/python3/dist-packages/nvidia/cu13/lib",
	}
	if !slices.Equal(got, want) {
		t.Errorf("places:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if p := places(e)[2]; p.Origin != "a CUDA 13.0 install" {
		t.Errorf("origin of %s: %q", p.Dir, p.Origin)
	}
	// Without any variable: the fixed places only.
	if got := dirs(places(fakeEnv(t, t.TempDir(), nil))); !slices.Equal(got, []string{"/usr/local/cuda/lib64",
		"/usr/lib/python3/dist-packages/nvidia/cublas/lib", "/usr/lib/python3/dist-packages/nvidia/cu13/lib"}) {
		t.Errorf("places without an environment: %v", got)
	}
}

// The choice: the first place that holds a cuBLAS, and there the newest soname; files only
// (a directory named like the library is not one), and places without one are passed over.
func TestSearchChoice(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    map[string]string
		files  []string
		first  string
		origin string
	}{
		{"CUDA_HOME first, newest soname", map[string]string{"CUDA_HOME": "/opt/cuda"},
			[]string{"opt/cuda/lib64/libcublas.so.11", "opt/cuda/lib64/libcublas.so.13", "usr/local/cuda/lib64/libcublas.so.12"},
			"/opt/cuda/lib64/libcublas.so.13", "$CUDA_HOME/lib64"},
		{"the default install when CUDA_HOME has none", map[string]string{"CUDA_HOME": "/opt/cuda"},
			[]string{"opt/cuda/lib64/", "usr/local/cuda/lib64/libcublas.so.12", "usr/local/cuda-13.0/lib64/libcublas.so.13"},
			"/usr/local/cuda/lib64/libcublas.so.12", "the default CUDA install"},
		{"the newest versioned install", nil,
			[]string{"usr/local/cuda-12.4/lib64/libcublas.so.12", "usr/local/cuda-12.9/lib64/libcublas.so.12", "usr/local/cuda-12.9/lib64/libcublas.so.12.9.1.4"},
			"/usr/local/cuda-12.9/lib64/libcublas.so.12", "a CUDA 12.9 install"},
		{"a directory is not a library", nil,
			[]string{"usr/local/cuda/lib64/libcublas.so.12/", "usr/local/cuda-11.8/lib64/libcublas.so.11"},
			"/usr/local/cuda-11.8/lib64/libcublas.so.11", "a CUDA 11.8 install"},
		{"the wheel of a virtual environment", map[string]string{"VIRTUAL_ENV": "/venv", "HOME": "/home/u"},
			[]string{"venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12", "home/u/.local/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12"},
			"/venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12", "Python wheel nvidia-cublas"},
		{"the user's wheel for CUDA 13", map[string]string{"HOME": "/home/u"},
			[]string{"home/u/.local/lib/python3.12/site-packages/nvidia/cu13/lib/libcublas.so.13"},
			"/home/u/.local/lib/python3.12/site-packages/nvidia/cu13/lib/libcublas.so.13", "Python wheel nvidia-cublas (CUDA 13)"},
		{"the system Python's wheel", nil,
			[]string{"usr/lib/python3/dist-packages/nvidia/cublas/lib/libcublas.so.12"},
			"/usr/lib/python3/dist-packages/nvidia/cublas/lib/libcublas.so.12", "Python wheel nvidia-cublas"},
		{"nothing", map[string]string{"CUDA_HOME": "/opt/cuda"}, []string{"opt/cuda/lib64/libcublasLt.so.12"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			tree(t, root, tc.files...)
			cs := candidates(fakeEnv(t, root, tc.env))
			if tc.first == "" {
				if len(cs) != 0 {
					t.Errorf("candidates %v, want none", cs)
				}
				return
			}
			if len(cs) == 0 || cs[0].Path != tc.first || cs[0].Place.Origin != tc.origin {
				t.Errorf("candidates %+v, want %s (%s) first", cs, tc.first, tc.origin)
			}
		})
	}
}
