package soak

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Checks a soak makes; a Violation names one.
const (
	CheckTerminal       = "terminal"             // not final on an ACTIVE subscription after the settle deadline
	CheckLost           = "lost"                 // neither final nor queued anywhere
	CheckReceipt        = "success-receipt"      // SUCCESS without a signed 2xx at the receiver
	CheckFailedEvidence = "failed-evidence"      // FAILED without a send of its own or a named refusal
	CheckOnePlace       = "one-place"            // queued in two places at once
	CheckConsecutive    = "consecutive-failures" // a subscription's counter past its threshold
	CheckDuplicates     = "duplicates"           // more duplicate 2xx than sends exposed to faults
	CheckSignature      = "signature"            // a request whose signature did not verify
	CheckHandback       = "handback"             // handback refused, failed, or left deliveries out of Redis
	CheckRecord         = "record"               // a delivery record missing or unreadable
	CheckShutdown       = "shutdown"             // SIGTERM did not stop a process within its drain timeout and a margin
)

// Violation is one check that failed, with the deliveries (or
// subscriptions) it failed for.
type Violation struct {
	Check  string   `json:"check"`
	Count  int      `json:"count"`
	IDs    []string `json:"ids,omitempty"` // the first few
	Detail string   `json:"detail,omitempty"`
}

// Report is what a soak found.
type Report struct {
	Seed     uint64        `json:"seed"`
	Duration time.Duration `json:"duration"` // the fault phase
	Settled  time.Duration `json:"settled"`  // how long settlement took after it
	Faults   map[Kind]int  `json:"faults"`

	Deliveries int `json:"deliveries"`
	Success    int `json:"success"`
	Failed     int `json:"failed"`
	// FailedRefused are FAILED deliveries with a named refusal and no send.
	FailedRefused int `json:"failed_refused"`
	// Held are deliveries still held for a subscription that is not ACTIVE.
	Held int `json:"held"`
	// Lost are deliveries neither final nor queued anywhere; Stranded are
	// queued but not final after the settle deadline; WronglyFailed are
	// FAILED without their own send or a named refusal.
	Lost          int `json:"lost"`
	Stranded      int `json:"stranded"`
	WronglyFailed int `json:"wrongly_failed"`
	// FailedReceived are FAILED deliveries the receiver answered a signed
	// 2xx for (the answer was lost to a fault before it was recorded).
	FailedReceived int `json:"failed_received"`
	// Leftover are final deliveries still named by a queue at the end
	// (harmless: the engine skips them), reported for the record.
	Leftover int `json:"leftover"`

	Emitted    int `json:"emitted"`     // deliveries admin's writer enqueued
	EmitErrors int `json:"emit_errors"` // emits that failed (Redis down)

	Requests        int      `json:"requests"`
	Receipts        int      `json:"receipts"`
	Duplicates      int      `json:"duplicates"`
	DuplicateBound  int      `json:"duplicate_bound"`
	BadSignatures   int      `json:"bad_signatures"`
	MaxConsecutive  int      `json:"max_consecutive_failures"`
	HandbackResults []string `json:"handback_results,omitempty"`
	// Reenabled counts subscriptions the soak had to set ACTIVE again while
	// settling (the engine disabled them although every endpoint was
	// healthy by then).
	Reenabled int `json:"reenabled_while_settling"`

	Violations []Violation `json:"violations,omitempty"`
	// Checked says the deliveries were checked. A run that stopped before
	// (a server that could not be brought back) says nothing about them;
	// the violations it recorded on the way (shutdown, counters, handback)
	// still stand.
	Checked bool `json:"checked"`

	mu  sync.Mutex
	idx map[string]int
}

// maxIDs is how many ids a violation lists.
const maxIDs = 10

// violate records that check failed for id (a delivery or subscription id,
// or "" for a run-wide finding).
func (r *Report) violate(check, id, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.idx == nil {
		r.idx = map[string]int{}
	}
	i, ok := r.idx[check]
	if !ok {
		i = len(r.Violations)
		r.idx[check] = i
		r.Violations = append(r.Violations, Violation{Check: check, Detail: detail})
	}
	v := &r.Violations[i]
	v.Count++
	if id != "" && len(v.IDs) < maxIDs {
		v.IDs = append(v.IDs, id)
	}
	if v.Detail == "" {
		v.Detail = detail
	}
}

// OK reports whether the checks ran and every one held.
func (r *Report) OK() bool { return r.Checked && len(r.Violations) == 0 }

// DuplicateRate is duplicate 2xx per delivery.
func (r *Report) DuplicateRate() float64 {
	if r.Deliveries == 0 {
		return 0
	}
	return float64(r.Duplicates) / float64(r.Deliveries)
}

// FaultCount is the number of faults injected.
func (r *Report) FaultCount() int {
	n := 0
	for _, c := range r.Faults {
		n += c
	}
	return n
}

// Summary is a few lines for a test log or a terminal.
func (r *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, %s of faults (%d injected: %s), settled in %s\n", r.Seed, r.Duration, r.FaultCount(), r.faultList(), r.Settled.Round(time.Second))
	fmt.Fprintf(&b, "deliveries %d: SUCCESS %d, FAILED %d (%d named refusals), held %d; lost %d, stranded %d, wrongly failed %d, FAILED yet received %d, leftover %d\n",
		r.Deliveries, r.Success, r.Failed, r.FailedRefused, r.Held, r.Lost, r.Stranded, r.WronglyFailed, r.FailedReceived, r.Leftover)
	fmt.Fprintf(&b, "receiver: %d requests, %d signed 2xx receipts, %d duplicates (bound %d, rate %.4f), %d bad signatures; max consecutive_failures %d; %d emits failed; %d subscriptions re-enabled while settling\n",
		r.Requests, r.Receipts, r.Duplicates, r.DuplicateBound, r.DuplicateRate(), r.BadSignatures, r.MaxConsecutive, r.EmitErrors, r.Reenabled)
	for _, h := range r.HandbackResults {
		fmt.Fprintf(&b, "handback: %s\n", h)
	}
	switch {
	case !r.Checked:
		b.WriteString("NOT CHECKED: the run stopped before its deliveries were checked; the delivery counts above are not findings, and any VIOLATION below was found before it stopped\n")
	case r.OK():
		b.WriteString("every check held\n")
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "VIOLATION %s ×%d: %s %v\n", v.Check, v.Count, v.Detail, v.IDs)
	}
	return b.String()
}

func (r *Report) faultList() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.Faults)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.Faults[k]))
	}
	return strings.Join(parts, ", ")
}
