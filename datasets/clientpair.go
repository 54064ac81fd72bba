package datasets

import (
	"fmt"
	"slices"
)

// The client-level adjacencies: C and C' differ in all the data of one client (client-level
// DP, as DP-FedAvg protects), not in one sample.
const (
	// ReplaceClient: C' holds a canary client, as many samples as the client, in its place.
	ReplaceClient AdjacencyKind = "replace-client"
	// RemoveClient: C' lacks the client; CPrime has one client fewer (the others keep their
	// order).
	RemoveClient AdjacencyKind = "remove-client"
)

// ClientLevel reports whether the kind changes a whole client.
func (k AdjacencyKind) ClientLevel() bool { return k == ReplaceClient || k == RemoveClient }

// NewClientPair builds C' from C = clients by replacing client client with canary
// (ReplaceClient; canary must have the client's shape, classes and length) or by removing it
// (RemoveClient; canary must be nil). Index is index, Sample the client's sample there and
// SamplePrime the canary client's (absent for RemoveClient): the representative sample whose
// per-sample statistics the trainer records, and the one the attacks that read the target
// sample look at. C is never modified.
func NewClientPair(clients []*Dataset, client, index int, kind AdjacencyKind, canary *Dataset) (*AdjacentPair, error) {
	if client < 0 || client >= len(clients) {
		return nil, fmt.Errorf("client pair: client %d, have clients 0 to %d", client, len(clients)-1)
	}
	d := clients[client]
	if d == nil {
		return nil, fmt.Errorf("client pair: client %d is nil", client)
	}
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("client pair: client %d: %w", client, err)
	}
	if d.Len() == 0 {
		return nil, fmt.Errorf("client pair: client %d has no samples", client)
	}
	if index < 0 || index >= d.Len() {
		return nil, fmt.Errorf("client pair: sample %d, client %d has samples 0 to %d", index, client, d.Len()-1)
	}
	p := &AdjacentPair{C: clients, Client: client, Index: index, Kind: kind, Sample: d.Sample(index)}
	switch kind {
	case ReplaceClient:
		if canary == nil {
			return nil, fmt.Errorf("client pair: replace-client needs a canary client")
		}
		if err := canary.Validate(); err != nil {
			return nil, fmt.Errorf("client pair: canary client: %w", err)
		}
		if !slices.Equal(canary.Shape, d.Shape) || canary.Classes != d.Classes || canary.Len() != d.Len() {
			return nil, fmt.Errorf("client pair: canary client has shape %v, %d classes, %d samples; client %d has %v, %d, %d",
				canary.Shape, canary.Classes, canary.Len(), client, d.Shape, d.Classes, d.Len())
		}
		p.CPrime = append([]*Dataset(nil), clients...)
		p.CPrime[client] = canary.Clone()
		p.SamplePrime = canary.Sample(index)
	case RemoveClient:
		if canary != nil {
			return nil, fmt.Errorf("client pair: remove-client takes no canary client")
		}
		if len(clients) < 2 {
			return nil, fmt.Errorf("client pair: remove-client needs at least 2 clients, have %d", len(clients))
		}
		p.CPrime = append(append([]*Dataset(nil), clients[:client]...), clients[client+1:]...)
	default:
		return nil, fmt.Errorf("client pair: unknown kind %q (want %s or %s)", kind, ReplaceClient, RemoveClient)
	}
	return p, nil
}

// CanaryClient builds a canary client from client d: "relabel" moves every sample to the
// next class (label+1 mod classes), so fitting the client means unlearning the task;
// "dirac" is d.Len() copies of sample (a Dirac canary from BuildCanary), a client whose
// update points one way with the largest norm the data allows. The result shares no storage
// with d or sample.
func CanaryClient(d *Dataset, kind CanaryKind, sample Sample) (*Dataset, error) {
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("canary client: %w", err)
	}
	out := &Dataset{Name: d.Name + "/canary-" + string(kind), Shape: append([]int(nil), d.Shape...), Classes: d.Classes}
	switch kind {
	case CanaryRelabel:
		out.Features = append([]float32(nil), d.Features...)
		out.Labels = make([]int32, d.Len())
		for i, y := range d.Labels {
			out.Labels[i] = (y + 1) % int32(d.Classes)
		}
	case CanaryDirac, CanaryHeldOut, CanaryCustom:
		if err := sample.checkFor(d); err != nil {
			return nil, fmt.Errorf("canary client: %w", err)
		}
		for i := 0; i < d.Len(); i++ {
			out.Features = append(out.Features, sample.Features...)
			out.Labels = append(out.Labels, sample.Label)
		}
	default:
		return nil, fmt.Errorf("canary client: unknown kind %q", kind)
	}
	return out, nil
}
