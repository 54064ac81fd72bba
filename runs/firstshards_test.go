package runs

import (
	"strings"
	"testing"
)

// FirstShards reads the first k shards of a directory as a set of k: shards trained after them
// are left out, a missing one among them is an error unless AllowPartial is given.
func TestFirstShards(t *testing.T) {
	base := testMeta([]string{"llr"}, false, false)
	shard := func(i int) Meta { m := base; m.Shard = Shard{i, 4}; return m }
	dir, _ := writeShards(t, shard(0), shard(1), shard(3))
	tab, err := Open(dir, FirstShards(2))
	if err != nil {
		t.Fatal(err)
	}
	if got := tab.Shards(); len(got) != 2 || got[0].Shard.Index != 0 || got[1].Shard.Index != 1 {
		t.Errorf("FirstShards(2) read %v", got)
	}
	tab.Close()
	if _, err := Open(dir, FirstShards(3)); err == nil || !strings.Contains(err.Error(), "1 of 3 shards missing (2/4)") {
		t.Errorf("FirstShards(3) with shard 2 missing: %v", err)
	}
	tab, err = Open(dir, FirstShards(3), AllowPartial())
	if err != nil || len(tab.Shards()) != 2 {
		t.Fatalf("FirstShards(3) AllowPartial: %v", err)
	}
	tab.Close()
	if _, err := Open(dir); err == nil {
		t.Error("the incomplete set opened without AllowPartial")
	}
}
