package engine

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// countingMsg counts the in-progress signals a work item received.
type countingMsg struct {
	jetstream.Msg
	signals int
}

func (m *countingMsg) InProgress() error { m.signals++; return nil }

func TestKeepAlive_SignalsDueItemsEveryPeriodAndNeverAfterWithdrawal(t *testing.T) {
	k := newKeepAlive(time.Second)
	start := time.Now()
	slow, quick := &countingMsg{}, &countingMsg{}
	withdrawSlow := k.track(slow)
	withdrawQuick := k.track(quick)

	k.signal(start.Add(500 * time.Millisecond)) // not due yet
	if slow.signals != 0 || quick.signals != 0 {
		t.Fatalf("signalled before the first period: %d, %d", slow.signals, quick.signals)
	}
	withdrawQuick()
	k.signal(start.Add(1100 * time.Millisecond))
	if slow.signals != 1 {
		t.Fatalf("slow item got %d signals after one period, want 1", slow.signals)
	}
	if quick.signals != 0 {
		t.Fatalf("withdrawn item was signalled %d times", quick.signals)
	}
	k.signal(start.Add(1500 * time.Millisecond)) // next due one period after the last signal
	k.signal(start.Add(2200 * time.Millisecond))
	if slow.signals != 2 {
		t.Fatalf("slow item got %d signals after two periods, want 2", slow.signals)
	}
	withdrawSlow()
	k.signal(start.Add(time.Hour))
	if slow.signals != 2 {
		t.Fatalf("signalled after withdrawal: %d", slow.signals)
	}
	if len(k.items) != 0 {
		t.Fatalf("%d items left registered", len(k.items))
	}
}
