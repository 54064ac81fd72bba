package datasets

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
)

// Many canaries per run, for the one-run audits (Steinke, Nasr and Jagielski, "Privacy auditing
// with one (1) training run", 2023): a run carries k canaries, each included independently with
// probability 1/2. The inclusion bits are part of the run's data, so they derive from the
// master seed and the run's index alone (InclusionBits); the canaries themselves are the same
// for every run of an experiment.

// InclusionBits returns the k inclusion bits of run run (a pair index) of an experiment with
// master seed seed: each bit is 1 with probability 1/2, independently of the others and of
// every other run's bits. Bit j does not depend on k, so a run's first k' < k bits are those
// of an experiment with k' canaries.
func InclusionBits(seed uint64, run, k int) []bool {
	r := newRNG(seed, "canary-inclusion/"+strconv.Itoa(run))
	bits := make([]bool, k)
	for j := range bits {
		bits[j] = r.uint64()>>63 == 1
	}
	return bits
}

// Slot is the place of one sample in a federated dataset: sample Index of client Client.
type Slot struct {
	Client int `json:"client"`
	Index  int `json:"index"`
}

// RecordCanaries are k canary records spread over the clients. Canary j owns slot Slots[j]: in
// a run that includes it the slot holds Samples[j], in a run that does not the slot keeps the
// client's own sample. Every client keeps its size either way (a replace adjacency per
// canary), so the batches a run draws do not depend on its bits.
type RecordCanaries struct {
	Kind    CanaryKind
	Slots   []Slot
	Samples []Sample
}

// RecordCanarySpec says how to place and build record canaries.
type RecordCanarySpec struct {
	// Count is k.
	Count int
	// Kind is CanaryDirac (default: each canary a blank input with its own saturated features
	// and a random label) or CanaryRelabel (the slot's own sample with another label).
	Kind CanaryKind
	// Pixels is the number of saturated features of a Dirac canary (DefaultDiracPixels if 0).
	Pixels int
	// Reserved are slots no canary may take (the audited target sample); ReservedClients are
	// clients no canary may go to (the target of a client-level adjacency).
	Reserved        []Slot
	ReservedClients []int
	// Seed determines every random choice.
	Seed uint64
}

// NewRecordCanaries places spec.Count canaries on the clients, round robin over the clients that
// are not reserved (canary j on the j-th of them modulo their number), each at a slot drawn
// without replacement from its client's free slots, and builds each canary's record.
func NewRecordCanaries(clients []*Dataset, spec RecordCanarySpec) (*RecordCanaries, error) {
	if spec.Count < 1 {
		return nil, fmt.Errorf("record canaries: need at least 1, got %d", spec.Count)
	}
	kind := spec.Kind
	if kind == "" {
		kind = CanaryDirac
	}
	if kind != CanaryDirac && kind != CanaryRelabel {
		return nil, fmt.Errorf("record canaries: kind %q is not %s or %s", kind, CanaryDirac, CanaryRelabel)
	}
	reservedClient := map[int]bool{}
	for _, c := range spec.ReservedClients {
		reservedClient[c] = true
	}
	reserved := map[Slot]bool{}
	for _, s := range spec.Reserved {
		reserved[s] = true
	}
	// Free slots of each usable client, in a seeded random order.
	var owners []int
	free := map[int][]int{}
	for c, d := range clients {
		if d == nil || reservedClient[c] {
			continue
		}
		r := newRNG(spec.Seed, "record-canary-slots/"+strconv.Itoa(c))
		for _, i := range r.perm(d.Len()) {
			if !reserved[Slot{c, i}] {
				free[c] = append(free[c], i)
			}
		}
		if len(free[c]) > 0 {
			owners = append(owners, c)
		}
	}
	room := 0
	for _, c := range owners {
		room += len(free[c])
	}
	if spec.Count > room {
		return nil, fmt.Errorf("record canaries: %d canaries, but the clients have only %d free sample slots (each canary takes the place of one sample)", spec.Count, room)
	}
	rc := &RecordCanaries{Kind: kind}
	used := map[int]int{}
	for j, c := 0, 0; j < spec.Count; c++ {
		owner := owners[c%len(owners)]
		if used[owner] == len(free[owner]) {
			continue // this client is full; the others take the rest
		}
		slot := Slot{owner, free[owner][used[owner]]}
		used[owner]++
		d := clients[owner]
		cs := CanarySpec{Kind: kind, Shape: d.Shape, Classes: d.Classes, Target: d.Sample(slot.Index), Pixels: spec.Pixels,
			Seed: canarySeed(spec.Seed, j)}
		s, err := BuildCanary(cs)
		if err != nil {
			return nil, fmt.Errorf("record canary %d: %w", j, err)
		}
		rc.Slots = append(rc.Slots, slot)
		rc.Samples = append(rc.Samples, s)
		j++
	}
	return rc, nil
}

// canarySeed gives canary j its own seed, so that canaries differ from one another.
func canarySeed(seed uint64, j int) uint64 {
	return newRNG(seed, "record-canary/"+strconv.Itoa(j)).uint64()
}

// Count is k.
func (rc *RecordCanaries) Count() int { return len(rc.Slots) }

// OnClient lists the canaries whose slots lie on client c, in canary order.
func (rc *RecordCanaries) OnClient(c int) []int {
	var out []int
	for j, s := range rc.Slots {
		if s.Client == c {
			out = append(out, j)
		}
	}
	return out
}

// Apply returns a copy of client d (client c of the federation) whose canary slots hold the
// canaries that bits include; d is not modified. Bits has one entry per canary.
func (rc *RecordCanaries) Apply(d *Dataset, c int, bits []bool) (*Dataset, error) {
	if len(bits) != len(rc.Slots) {
		return nil, fmt.Errorf("record canaries: %d inclusion bits for %d canaries", len(bits), len(rc.Slots))
	}
	out := d.Clone()
	dim := d.Dim()
	for j, s := range rc.Slots {
		if s.Client != c || !bits[j] {
			continue
		}
		if s.Index >= d.Len() {
			return nil, fmt.Errorf("record canary %d: slot %d of client %d, which has %d samples", j, s.Index, c, d.Len())
		}
		if err := rc.Samples[j].checkFor(d); err != nil {
			return nil, fmt.Errorf("record canary %d: %w", j, err)
		}
		copy(out.Features[s.Index*dim:(s.Index+1)*dim], rc.Samples[j].Features)
		out.Labels[s.Index] = rc.Samples[j].Label
	}
	return out, nil
}

// Hash identifies the canaries for run files: the hex SHA-256 of the tag
// "fedaudit-record-canaries-v1", the kind, then per canary its client, index (little-endian
// uint64), label (int32) and features (float32 bits).
func (rc *RecordCanaries) Hash() string {
	h := sha256.New()
	h.Write([]byte("fedaudit-record-canaries-v1"))
	h.Write([]byte(rc.Kind))
	h.Write([]byte{0})
	var b [8]byte
	for j, s := range rc.Slots {
		for _, v := range []int{s.Client, s.Index} {
			binary.LittleEndian.PutUint64(b[:], uint64(v))
			h.Write(b[:])
		}
		binary.LittleEndian.PutUint32(b[:4], uint32(rc.Samples[j].Label))
		h.Write(b[:4])
		for _, f := range rc.Samples[j].Features {
			binary.LittleEndian.PutUint32(b[:4], math.Float32bits(f))
			h.Write(b[:4])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
