package datasets

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// AdjacencyKind says how the two worlds of an adjacent pair differ.
type AdjacencyKind string

// The adjacencies: in every one, C and C' agree except at sample Index of client Client.
const (
	// Replace: C holds the client's original sample there, C' the replacement.
	Replace AdjacencyKind = "replace"
	// Add: C' holds the replacement inserted at Index; C lacks it.
	Add AdjacencyKind = "add"
	// Remove: C holds the client's sample Index; C' lacks it.
	Remove AdjacencyKind = "remove"
)

// AdjacentPair is a pair of federated datasets C and C' that differ in one sample of one client
// (the paper's Definition 1): Sample (epsilon) is in C, SamplePrime (epsilon') in C'. For Add,
// Sample is absent; for Remove, SamplePrime is. Clients other than Client are the same
// *Dataset in both worlds; the changed client of C' is a copy, so C is never modified.
type AdjacentPair struct {
	C, CPrime []*Dataset
	// Client and Index locate the differing sample (for Add, where it is inserted in C').
	Client, Index int
	Kind          AdjacencyKind
	// Sample and SamplePrime are copies; a Sample without features is absent.
	Sample, SamplePrime Sample
}

// NewAdjacentPair builds C' from C = clients by changing sample index of client client as kind
// says. replacement is epsilon' for Replace and Add (it must fit the client's shape and
// classes) and must be empty for Remove. For Add, index may be the client's length to append.
func NewAdjacentPair(clients []*Dataset, client, index int, kind AdjacencyKind, replacement Sample) (*AdjacentPair, error) {
	if client < 0 || client >= len(clients) {
		return nil, fmt.Errorf("adjacent pair: client %d, have clients 0 to %d", client, len(clients)-1)
	}
	d := clients[client]
	if d == nil {
		return nil, fmt.Errorf("adjacent pair: client %d is nil", client)
	}
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("adjacent pair: client %d: %w", client, err)
	}
	last := d.Len() - 1
	if kind == Add {
		last = d.Len()
	}
	if index < 0 || index > last {
		return nil, fmt.Errorf("adjacent pair: %s at index %d of client %d, which has %d samples", kind, index, client, d.Len())
	}
	p := &AdjacentPair{
		C:      clients,
		CPrime: append([]*Dataset(nil), clients...),
		Client: client,
		Index:  index,
		Kind:   kind,
	}
	dim := d.Dim()
	changed := &Dataset{Name: d.Name, Shape: append([]int(nil), d.Shape...), Classes: d.Classes}
	switch kind {
	case Replace, Add:
		if err := replacement.checkFor(d); err != nil {
			return nil, fmt.Errorf("adjacent pair: replacement for client %d: %w", client, err)
		}
		p.SamplePrime = replacement.Clone()
	case Remove:
		if replacement.Present() {
			return nil, fmt.Errorf("adjacent pair: remove takes no replacement sample")
		}
	default:
		return nil, fmt.Errorf("adjacent pair: unknown kind %q (want %s, %s or %s)", kind, Replace, Add, Remove)
	}
	if kind != Add {
		p.Sample = d.Sample(index)
	}
	// Build the changed client as before + middle + after, where before and after are the
	// untouched samples around the change.
	after := index
	if kind != Add {
		after = index + 1
	}
	changed.Features = append(changed.Features, d.Features[:index*dim]...)
	changed.Labels = append(changed.Labels, d.Labels[:index]...)
	if kind != Remove {
		changed.Features = append(changed.Features, p.SamplePrime.Features...)
		changed.Labels = append(changed.Labels, p.SamplePrime.Label)
	}
	changed.Features = append(changed.Features, d.Features[after*dim:]...)
	changed.Labels = append(changed.Labels, d.Labels[after:]...)
	p.CPrime[client] = changed
	return p, nil
}

// Hash identifies the pair for run files: the hex SHA-256 of the tag "fedaudit-adjacent-v1",
// the kind, then little-endian uint64 values client, index and client count, then the 32-byte
// hash (Dataset.Hash) of every client of C in order, then of every client of C'.
func (p *AdjacentPair) Hash() string {
	h := sha256.New()
	h.Write([]byte("fedaudit-adjacent-v1"))
	h.Write([]byte(p.Kind))
	h.Write([]byte{0}) // ends the kind, so no kind is a prefix of what follows
	var b [8]byte
	for _, v := range []int{p.Client, p.Index, len(p.C)} {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		h.Write(b[:])
	}
	for _, world := range [][]*Dataset{p.C, p.CPrime} {
		for _, d := range world {
			sum, _ := hex.DecodeString(d.Hash())
			h.Write(sum)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
