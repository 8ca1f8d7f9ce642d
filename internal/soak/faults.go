package soak

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"syscall"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// faults injects the plan's faults one after the other, each at its time
// or as soon as the previous one is over.
func (s *soak) faults(ctx context.Context) error {
	// The rollback stops every process for as long as handback takes; the
	// faults after it are shifted by that time, so the run has its whole
	// plan however slow the handback was.
	var shift time.Duration
	for _, f := range s.plan.Faults {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(s.start.Add(f.At + shift))):
		}
		if time.Since(s.start) >= s.cfg.Duration+shift && f.Kind != Handback {
			break
		}
		from := time.Now()
		disruptive, err := s.inject(ctx, f)
		if err != nil {
			return fmt.Errorf("soak: %s: %w", f.Kind, err)
		}
		if f.Kind == Handback {
			shift += time.Since(from)
		}
		if disruptive {
			s.wmu.Lock()
			s.windows = append(s.windows, window{from: from, to: exposureEnd(f.Kind, from, time.Now())})
			s.wmu.Unlock()
		}
		s.rep.Faults[f.Kind]++
	}
	// The fault phase lasts its whole duration even when the plan ends early.
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(s.start.Add(s.cfg.Duration + shift))):
	}
	return nil
}

// inject carries out one fault; disruptive faults are the ones that may
// cut a send off after the receiver answered it.
func (s *soak) inject(ctx context.Context, f Fault) (disruptive bool, err error) {
	cluster, embedded := s.spaces[0], s.spaces[1]
	switch f.Kind {
	case KillReplica, TermReplica:
		replicas := cluster.relays[:2]
		return true, s.bounce(ctx, f, replicas[f.Target%len(replicas)])
	case StallReplica:
		replicas := cluster.relays[:2]
		r := replicas[f.Target%len(replicas)]
		// Longer than AckWait (3s), as a long GC pause or a starved VM:
		// the stalled replica's work comes back to the other one while it
		// still holds it.
		freeze := 3*time.Second + f.Down
		s.logf("%s %s (frozen %s)", f.Kind, r.name, freeze.Round(time.Millisecond))
		if err := r.proc.signal(syscall.SIGSTOP); err != nil {
			return true, err
		}
		sleep(ctx, freeze)
		return true, r.proc.signal(syscall.SIGCONT)
	case KillBridge, TermBridge:
		return true, s.bounce(ctx, f, cluster.relays[2])
	case KillEmbedded, TermEmbedded:
		return true, s.bounce(ctx, f, embedded.relays[0])
	case KillRedis:
		s.logf("%s (down %s)", f.Kind, f.Down.Round(time.Millisecond))
		if err := s.redis.Kill(); err != nil {
			return true, err
		}
		// Restarted even when the phase ends first: admin and the
		// settlement need Redis.
		sleep(ctx, f.Down)
		return true, s.redis.Restart(context.WithoutCancel(ctx))
	case RestartNATS, KillNATS:
		n := s.nats.nodes[f.Target%len(s.nats.nodes)]
		sig := syscall.SIGTERM
		if f.Kind == KillNATS {
			sig = syscall.SIGKILL
		}
		s.logf("%s %s (down %s)", f.Kind, n.name, f.Down.Round(time.Millisecond))
		return true, n.restart(context.WithoutCancel(ctx), sig, f.Down)
	case KillStreamLeader:
		leader, err := streamLeader(ctx, s.nats.URLs(), "JETRELAY_DISPATCH")
		if err != nil {
			s.logf("%s: no leader to kill (%v)", f.Kind, err)
			return false, nil
		}
		s.logf("%s %s (down %s)", f.Kind, leader, f.Down.Round(time.Millisecond))
		return true, s.nats.node(leader).restart(context.WithoutCancel(ctx), syscall.SIGKILL, f.Down)
	case Pause, Disable:
		sp, subID := s.subscription(f.Target)
		st := proto.SubscriptionPaused
		if f.Kind == Disable {
			st = proto.SubscriptionDisabled
		}
		s.logf("%s %s", f.Kind, subID)
		return false, ignoreRedisDown(sp.writer.SetStatus(ctx, subID, st))
	case Resume, Enable:
		from := proto.SubscriptionPaused
		if f.Kind == Enable {
			from = proto.SubscriptionDisabled
		}
		return false, s.reactivate(ctx, f, from)
	case Requeue:
		sp, subID := s.subscription(f.Target)
		code, out, err := run(ctx, 30*time.Second, s.opsEnv(sp), s.bins.Jetrelay,
			"deliveries", "requeue", "--status", "FAILED", "--subscription", subID)
		if err != nil {
			return false, err
		}
		s.logf("%s %s: exit %d: %s", f.Kind, subID, code, oneLine(out))
		return false, nil
	case Handback:
		return true, s.handback(ctx)
	}
	return false, fmt.Errorf("unknown fault kind %q", f.Kind)
}

// exposureEnd is when the sends a fault can repeat stop being at risk: a
// killed process's sends are the ones in flight at the kill; a stopped one
// drains first; an outage of NATS, or a frozen replica, puts every send at
// risk until it is over. An outage of Redis lasts a little longer for the
// engine than for the server: a go-redis pool whose dials failed keeps
// returning the last dial error until its own probe, once a second, reaches
// the restarted server, so an outcome write can still fail (and its send be
// repeated) up to a second after the restart; the window keeps a second
// more for a loaded machine.
func exposureEnd(k Kind, from, over time.Time) time.Time {
	const margin = 250 * time.Millisecond
	switch k {
	case KillReplica, KillBridge, KillEmbedded:
		return from.Add(margin)
	case TermReplica, TermBridge, TermEmbedded, Handback:
		return from.Add(drainTimeout + margin)
	case KillRedis:
		return over.Add(2 * time.Second)
	}
	return over
}

// bounce stops a jetrelay process (SIGKILL or SIGTERM by the fault's kind)
// and starts it again after the fault's down time.
func (s *soak) bounce(ctx context.Context, f Fault, r *relay) error {
	sig := syscall.SIGKILL
	if strings.HasPrefix(string(f.Kind), "SIGTERM") {
		sig = syscall.SIGTERM
	}
	s.logf("%s %s (down %s)", f.Kind, r.name, f.Down.Round(time.Millisecond))
	r.stop(sig, s.rep)
	if sig == syscall.SIGTERM && r.proc.exitCode() != 0 {
		s.logf("jetrelay %s exited %d after SIGTERM", r.name, r.proc.exitCode())
	}
	if err := sleep(ctx, f.Down); err != nil {
		// The run is ending: settle starts whatever is stopped.
		return nil
	}
	return r.start(context.WithoutCancel(ctx))
}

// subscription picks the target'th subscription across both keyspaces.
func (s *soak) subscription(target int) (*keyspace, string) {
	n := 0
	for _, sp := range s.spaces {
		n += len(sp.eps)
	}
	i := target % n
	for _, sp := range s.spaces {
		if i < len(sp.eps) {
			return sp, sp.eps[i].subID
		}
		i -= len(sp.eps)
	}
	panic("unreachable")
}

// reactivate sets a subscription whose status is from ACTIVE again (the
// target first, else the first one found), as an operator resuming or
// re-enabling it through admin.
func (s *soak) reactivate(ctx context.Context, f Fault, from proto.SubscriptionStatus) error {
	n := 0
	for _, sp := range s.spaces {
		n += len(sp.eps)
	}
	for k := range n {
		sp, subID := s.subscription(f.Target + k)
		raw, err := sp.rdb.Get(ctx, store.SubscriptionKey(subID)).Bytes()
		if err != nil {
			return ignoreRedisDown(err)
		}
		sub, err := proto.ParseSubscription(raw)
		if err != nil || sub.Status != from {
			continue
		}
		s.logf("%s %s (was %s)", f.Kind, subID, from)
		return ignoreRedisDown(sp.writer.SetStatus(ctx, subID, proto.SubscriptionActive))
	}
	return nil
}

// opsEnv is the environment of an operator command against a keyspace.
func (s *soak) opsEnv(sp *keyspace) []string {
	env := maps.Clone(sp.env)
	env["WEBHOOK_SECRET_ENCRYPTION_KEY"] = s.keyB64
	env["JETRELAY_LOG_LEVEL"] = "warn"
	return cleanEnv(env)
}

// ignoreRedisDown drops the error of an admin write that met no Redis: the
// operator's click failed, which is not the harness's failure.
func ignoreRedisDown(err error) error {
	if err == nil || isConnError(err) {
		return nil
	}
	return err
}

func isConnError(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "EOF") ||
		strings.Contains(msg, "connection reset") || strings.Contains(msg, "i/o timeout") || strings.Contains(msg, "LOADING")
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// oneLine is a command's output on one line, cut to a readable length.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		s = s[:400] + " …"
	}
	return s
}
