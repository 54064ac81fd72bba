package main

import (
	"slices"
	"strings"
	"testing"
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
	cpu := backendFlags{name: "cpu", devices: "0,1"}
	if err := cpu.check(); err == nil || !strings.Contains(err.Error(), "--devices needs --backend gpu") {
		t.Errorf("--devices with the CPU backend: %v", err)
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
