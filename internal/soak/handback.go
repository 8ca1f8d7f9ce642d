package soak

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"syscall"
	"time"
)

// handbackPatience is how long the soak retries a refused handback once
// every jetrelay process has stopped ("within seconds"): a refusal while
// the heartbeat of a process that was killed earlier runs out is fine, one
// that outlasts this is a violation.
const handbackPatience = 10 * time.Second

// handback is the rollback and switch-over in the middle of the run: every
// jetrelay process stops (SIGTERM), `jetrelay handback` returns each
// keyspace's deliveries to the reference service's Redis keys, every
// delivery that is not final must then be in Redis (a rollback would send
// nothing else), and jetrelay starts again.
func (s *soak) handback(ctx context.Context) error {
	s.logf("%s: stopping every jetrelay process", Handback)
	for _, sp := range s.spaces {
		for _, r := range sp.relays {
			r.stop(syscall.SIGTERM, s.rep)
		}
	}
	for _, sp := range s.spaces {
		if err := s.handbackSpace(ctx, sp); err != nil {
			return err
		}
	}
	s.logf("%s: switching over (starting jetrelay again)", Handback)
	for _, sp := range s.spaces {
		for _, r := range sp.relays {
			if err := r.start(context.WithoutCancel(ctx)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *soak) handbackSpace(ctx context.Context, sp *keyspace) error {
	started := time.Now()
	var (
		code  int
		out   string
		tries int
	)
	for {
		tries++
		var err error
		code, out, err = run(ctx, time.Minute, s.opsEnv(sp), s.bins.Jetrelay, "handback")
		if err != nil {
			return err
		}
		if code == 0 || time.Since(started) > handbackPatience {
			break
		}
		if sleep(ctx, time.Second) != nil {
			return nil
		}
	}
	result := fmt.Sprintf("%s: exit %d after %d tries in %s: %s", sp.name, code, tries, time.Since(started).Round(100*time.Millisecond), oneLine(out))
	s.rep.mu.Lock()
	s.rep.HandbackResults = append(s.rep.HandbackResults, result)
	s.rep.mu.Unlock()
	s.logf("%s %s", Handback, result)
	if code != 0 {
		s.rep.violate(CheckHandback, sp.name+" keyspace: refused", fmt.Sprintf("%s keyspace: handback did not succeed within %s of every process stopping: %s", sp.name, handbackPatience, oneLine(out)))
		return nil
	}
	// The load pauses while Redis is read, so a delivery admin is writing
	// is not caught between its record and its push.
	sp.gate.Lock()
	defer sp.gate.Unlock()
	recs, err := s.records(ctx, sp)
	if err != nil {
		return fmt.Errorf("read deliveries after handback: %w", err)
	}
	places := map[string][]string{}
	if err := s.redisPlaces(ctx, sp, places); err != nil {
		return fmt.Errorf("read Redis queues after handback: %w", err)
	}
	// The embedded server's stream is readable only while its process
	// runs; handback's own report says what it left there.
	inStream := map[string][]string{}
	if sp == s.spaces[0] {
		if err := s.streamPlaces(ctx, sp, inStream); err != nil {
			return fmt.Errorf("read the dispatch stream after handback: %w", err)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(recs)) {
		d := recs[id]
		switch {
		case len(places[id]) > 0 && len(inStream[id]) > 0:
			s.rep.violate(CheckOnePlace, id, fmt.Sprintf("after handback both in Redis (%s) and in JetStream (%s)", places[id][0], inStream[id][0]))
		case d == nil || d.Status.Terminal() || len(places[id]) > 0:
		case len(inStream[id]) > 0:
			s.rep.violate(CheckHandback, id, fmt.Sprintf("not final, left in JetStream (%s) and not in Redis after handback: a rollback to the reference service would never send it (%s keyspace)", inStream[id][0], sp.name))
		default:
			s.rep.violate(CheckHandback, id, fmt.Sprintf("not final and in no Redis queue after handback: a rollback to the reference service would never send it (%s keyspace)", sp.name))
		}
	}
	return nil
}
