package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/cuda"
)

// --devices: ordinals or all, refused without --backend gpu and for malformed lists; with
// several devices and no --shards, one shard per device (at most one per pair).
func TestDevicesFlag(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []int
		err  string
	}{
		{"0,1,3", []int{0, 1, 3}, ""},
		{" 2 , 0", []int{2, 0}, ""},
		{"0,0", nil, "listed twice"},
		{"-1", nil, "not a GPU ordinal"},
		{"one", nil, "not a GPU ordinal"},
		{"", nil, "not a GPU ordinal"},
	} {
		got, err := parseDeviceList(tc.text)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: got %v, %v; want an error containing %q", tc.text, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: got %v, %v; want %v", tc.text, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		flags backendFlags
		err   string
	}{
		{backendFlags{name: "cpu", devices: "0,1"}, "--devices needs --backend gpu"},
		{backendFlags{name: "cpu", device: 1}, "--device needs --backend gpu"},
		{backendFlags{name: "auto", device: -1}, "not a GPU ordinal"},
		{backendFlags{name: "cpu"}, ""},
		{backendFlags{name: "auto", device: 1}, ""},
	} {
		err := tc.flags.check()
		var usage *usageError
		if tc.err == "" && err != nil || tc.err != "" && (!errors.As(err, &usage) || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%+v: %v, want a usage error containing %q", tc.flags, err, tc.err)
		}
	}
	b := backendFlags{deviceList: []int{0, 1, 2, 3}}
	for _, tc := range []struct {
		shards int
		given  bool
		pairs  int
		want   int
	}{{1, false, 100, 4}, {1, true, 100, 1}, {8, false, 100, 8}, {1, false, 3, 3}} {
		if got := b.defaultShards(tc.shards, tc.given, tc.pairs); got != tc.want {
			t.Errorf("defaultShards(%d, given %v, %d pairs) = %d, want %d", tc.shards, tc.given, tc.pairs, got, tc.want)
		}
	}
	if got := (&backendFlags{deviceList: []int{5}}).defaultShards(1, false, 100); got != 1 {
		t.Errorf("one device: %d shards, want 1", got)
	}
}

// TestTrainFlagConflicts: flags that cannot be honoured are usage errors (exit 2) before any
// training: --shard i/n beside a different --shards, and --backend gpu in a build without one.
func TestTrainFlagConflicts(t *testing.T) {
	cfg := smallConfig(t, nil)
	out := filepath.Join(t.TempDir(), "out")
	cases := [][]string{{"--shard", "0/4", "--shards", "2"}}
	if !cuda.Available() {
		cases = append(cases, []string{"--backend", "gpu"})
	}
	for _, extra := range cases {
		args := append([]string{"train", "--config", cfg, "--out", out, "--quiet"}, extra...)
		if code, _, stderr := cli(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2:\n%s", extra, code, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "runs")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused train wrote %s/runs: %v", out, err)
	}
}
