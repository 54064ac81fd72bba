package traintest

import (
	"context"
	"math"
	"testing"
	"time"
)

// RoundClock splits a run at the end of its first round: the rate after it counts the other
// rounds over the time after it, a warm-up's round is forgotten at Start, and a run with one
// round or none ended has no rate after round 1.
func TestRoundClock(t *testing.T) {
	var c RoundClock
	c.Progress(1, 1) // a warm-up's round
	c.Start()
	time.Sleep(20 * time.Millisecond)
	c.Progress(1, 3)
	time.Sleep(20 * time.Millisecond)
	c.Progress(2, 3)
	c.Progress(3, 3)
	sec, first, steady := c.Split(4, 3)
	if !(first >= 0.02 && first < sec && sec >= 0.04) {
		t.Errorf("seconds %v, round 1 %v: want round 1 >= 0.02 s and before the end >= 0.04 s", sec, first)
	}
	// 4 replicas x 2 rounds over the time after round 1: the 20 ms slept and the calls after
	// it, so at most 8/0.02.
	if want := 8 / (sec - first); math.Abs(steady-want) > 0.05*want || steady > 8/0.02 {
		t.Errorf("rate after round 1 %v, want about %v", steady, want)
	}
	c.Start()
	c.Progress(1, 1)
	if _, first, steady := c.Split(4, 1); first <= 0 || steady != 0 {
		t.Errorf("one round: round 1 %v, rate after it %v: want a time and no rate", first, steady)
	}
	c.Start()
	if sec, first, steady := c.Split(4, 3); sec <= 0 || first != 0 || steady != 0 {
		t.Errorf("no round ended: %v, %v, %v", sec, first, steady)
	}
}

// runCNN reports the split: W2 on the CPU backend at 2 replicas and 2 rounds.
func TestRunCNNSplitsTheFirstRound(t *testing.T) {
	if testing.Short() {
		t.Skip("two rounds of LeNet-5")
	}
	r, err := RunW2(context.Background(), nil, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !(r.FirstRoundSeconds > 0 && r.FirstRoundSeconds < r.Seconds) {
		t.Fatalf("round 1 took %v s of %v", r.FirstRoundSeconds, r.Seconds)
	}
	if want := 2 / (r.Seconds - r.FirstRoundSeconds); math.Abs(r.SteadyReplicaRoundsPerSec-want) > 0.01*want {
		t.Errorf("rate after round 1 %v, want %v (2 replica-rounds over %v s)", r.SteadyReplicaRoundsPerSec, want, r.Seconds-r.FirstRoundSeconds)
	}
}
