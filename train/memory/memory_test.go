package memory

import "testing"

// TestDeviceGroupPairsWithinFreeMemory checks that a group_memory above the device's free
// memory does not size groups the device cannot hold: with 40 GiB free and a budget of
// 100 GiB, groups of 1 GiB pairs must fit 90% of the 40 GiB, and a pair larger than the
// device is refused rather than trained into an out-of-memory error.
func TestDeviceGroupPairsWithinFreeMemory(t *testing.T) {
	m := Memory{Params: 1000, Fixed: 1 << 20, PerPair: 1 << 30}
	free := int64(40 << 30)
	g, err := m.DeviceGroupPairs(100<<30, free, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Bytes(g); got > free/10*9 {
		t.Errorf("group of %d pairs needs %d bytes, above 90%% of the %d free", g, got, free)
	}
	big := Memory{Params: 1000, Fixed: 1 << 20, PerPair: 60 << 30}
	if g, err := big.DeviceGroupPairs(100<<30, free, 10); err == nil {
		t.Errorf("a pair of 60 GiB on a device with 40 GiB free: group of %d pairs, want an error", g)
	}
	// Within the free memory the budget still decides; unknown free memory (0) leaves it.
	if g, err := m.DeviceGroupPairs(4<<30, free, 1000); err != nil || g != 3 {
		t.Errorf("budget 4 GiB: %d pairs (%v), want 3", g, err)
	}
	if g, err := m.DeviceGroupPairs(4<<30, 0, 1000); err != nil || g != 3 {
		t.Errorf("budget 4 GiB, free unknown: %d pairs (%v), want 3", g, err)
	}
}

// The device's pieces of a long inner product's partial sums: none for W1's and LeNet-5's
// rows, 256 x 32 float64 values a replica for ResNet-18's 11.2 M parameters.
func TestDevicePieces(t *testing.T) {
	for _, c := range []struct {
		d    int
		want float64
	}{{50_890, 0}, {61_706, 0}, {1 << 19, 256 * 2 * 8}, {11_220_132, 256 * 32 * 8}} {
		if got := devicePieces(c.d); got != c.want {
			t.Errorf("devicePieces(%d) = %v, want %v", c.d, got, c.want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{1, "1 B"}, {21 << 10, "21 KiB"}, {5 << 20, "5 MiB"}, {3 << 29, "1.5 GiB"},
		{1<<20 - 1, "1 MiB"}, {1<<30 - 1, "1.0 GiB"}, {1<<20 - 1<<10, "1023 KiB"}} {
		if got := FormatBytes(c.n); got != c.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
