package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/bridge"
)

// backlogRound builds one round's four cases from the healthy rate and
// the CPU per healthy delivery of each (alone, black hole, 503, floor).
func backlogRound(rates [4]float64, cpuPer [4]time.Duration) []*backlogCase {
	const received = 5000
	var cases []*backlogCase
	for i, bad := range backlogCases {
		cases = append(cases, &backlogCase{
			bad: bad, received: received, rate: rates[i],
			drain: time.Duration(float64(received) / rates[i] * float64(time.Second)),
			cpu:   cpuPer[i] * received * 7 / 8, redisCPU: cpuPer[i] * received / 8,
		})
	}
	return cases
}

// The report gives every round's rate and CPU ratios, shows the round
// whose two target ratios have the median sum, judges each target on its
// own median, and calls the floor a bound of the target only when its
// medians by rate and by CPU are both below it.
func TestBacklogReport_FloorBoundsTheTargetOnlyWhenItsRateAndCPUMediansAreBelowIt(t *testing.T) {
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	rounds := [][]*backlogCase{
		backlogRound([4]float64{8000, 4800, 4000, 8800}, [4]time.Duration{us(200), us(320), us(400), us(250)}), // floor's rate above 1 (noise)
		backlogRound([4]float64{8000, 5200, 5600, 6400}, [4]time.Duration{us(200), us(300), us(310), us(250)}), // the median round
		backlogRound([4]float64{8000, 6400, 6400, 3200}, [4]time.Duration{us(200), us(300), us(300), us(260)}), // floor's rate below the others (noise)
	}
	for i, r := range rounds {
		r[1].badPutOffs = map[string]int{"subscription_busy": 5000}
		r[2].badPutOffs = map[string]int{"breaker_open": 4000, "retry": 1000}
		// The put-off path's profiled CPU: 30, 35, 40 µs per put-off
		// beside the black hole (the healthy one's 1000 put-offs
		// counted in), 20, 25, 30 µs beside the 503 endpoint.
		r[1].healthyPutOffs = map[string]int{"subscription_busy": 1000}
		r[1].bridge = bridge.Stats{Parked: 4000, Unparked: 10}
		r[1].profiled, r[1].putOffPath = true, us(30+5*i)*6000
		r[2].profiled, r[2].putOffPath = true, us(20+5*i)*5000
	}
	o := &backlogOptions{deliveries: 5000}
	doc := backlogReport(o, rounds).doc
	for _, want := range []string{
		"round 1: 8000/s alone, 0.600 (by CPU 0.625) beside the black hole, 0.500 (0.500) beside the 503 endpoint, 1.100 (0.800) beside the floor",
		"| beside a black hole | 5000 / 5000 | 961.5 ms | 5200 | 0.650 | ≥ 0.90 (median): **missed** |",
		"beside a black hole **missed** (median ratio 0.650 over 3 rounds)",
		"beside an endpoint answering 503 **missed** (median ratio 0.700 over 3 rounds)",
		"| beside a backlog already delivered (the floor) | 5000 / 5000 | 781.2 ms | 6400 | 0.800 | none: the two above if each of their bad deliveries became a work item (median 0.800) |",
		"The floor (deliveries that need nothing but their intake): median ratio 0.800, by CPU 0.800, both below 0.90",
		// One bad delivery: the case's CPU above alone's over the 5000
		// bad deliveries (black hole 120, 100, 100 µs; 503 200, 110,
		// 100 µs), and one item's intake (the floor above alone: 50, 50,
		// 60 µs).
		"One bad delivery, median over the rounds: 100 µs beside a black hole (4000 parked, 5000 subscription_busy); 110 µs beside an endpoint answering 503 (0 parked, 4000 breaker_open, 1000 retry).",
		"the intake of one work item, the floor's CPU above alone's per item it added: 50 µs.",
		"| beside a black hole | 0 | 0 | 5000 subscription_busy | 4000 (10) | 100 µs | 35.0 µs |",
		"The engine's own put-off path, median over the rounds (lowest–highest): 35.0 µs beside a black hole (30.0–40.0); 25.0 µs beside an endpoint answering 503 (20.0–30.0).",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q:\n%s", want, doc)
		}
	}

	// A floor whose CPU says the target is within reach is not called a
	// bound, whatever one drain's rate said.
	for _, r := range rounds {
		r[3].cpu, r[3].redisCPU = us(210)*5000*7/8, us(210)*5000/8
	}
	doc = backlogReport(o, rounds).doc
	if !strings.Contains(doc, "median ratio 0.800, by CPU 0.952.") || strings.Contains(doc, "both below") {
		t.Errorf("a floor at 0.952 by CPU was called a bound of the target:\n%s", doc)
	}
}
