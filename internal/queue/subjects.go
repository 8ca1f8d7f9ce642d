package queue

import (
	"encoding/base64"
	"strings"
)

// Subjects of waiting work. The dispatch stream holds, besides the work
// items on Config.Subject, the deliveries that wait for something:
//
//   - <Subject>.sched.<delivery> holds a delivery's one pending wake-up, a
//     JetStream message schedule whose target is Config.Subject: a retry
//     after its backoff, or a put-off (open breaker, busy subscription).
//     Publishing again on the same subject replaces the wake-up, so a
//     delivery never has two.
//   - <Subject>.sched.held.<subscription> is the subscription's held-check,
//     and <Subject>.sched.held.<subscription>.evidence an immediate one
//     after a success through its open breaker.
//   - <Subject>.held.<subscription>.<delivery> holds a delivery of a PAUSED
//     or DISABLED subscription until the subscription is active again, or
//     one its open circuit breaker holds back.
//
// A delivery or subscription id is used as the subject token when it is made
// only of letters, digits, '-' and '_'; any other id is written as '~'
// followed by its unpadded base64url form, so every id maps to exactly one
// token and no id can add subject tokens or wildcards.

// ScheduleSubject is the subject of deliveryID's pending wake-up.
func (c Config) ScheduleSubject(deliveryID string) string {
	return c.WithDefaults().Subject + ".sched." + SubjectToken(deliveryID)
}

// ScheduleSubjects is the wildcard that matches every pending wake-up.
func (c Config) ScheduleSubjects() string {
	return c.WithDefaults().Subject + ".sched.>"
}

// HeldCheckSubject is the subject of subscriptionID's pending held-check
// (NewHeldCheckMsg). It has one token more than a delivery's wake-up, so it
// can never be mistaken for one, and ScheduleSubjects matches it too.
func (c Config) HeldCheckSubject(subscriptionID string) string {
	return c.WithDefaults().Subject + ".sched.held." + SubjectToken(subscriptionID)
}

// EvidenceCheckSubject is the subject of the immediate held-check a send
// that succeeded through subscriptionID's open breaker asks for. It is not
// the regular held-check's subject, so the next regular check, scheduled
// by a check running at the same moment, cannot replace it; it carries
// HeldCheckHeader like every held-check, and ScheduleSubjects matches it.
func (c Config) EvidenceCheckSubject(subscriptionID string) string {
	return c.HeldCheckSubject(subscriptionID) + ".evidence"
}

// HeldSubject is the subject of deliveryID while subscriptionID holds it.
func (c Config) HeldSubject(subscriptionID, deliveryID string) string {
	return c.WithDefaults().Subject + ".held." + SubjectToken(subscriptionID) + "." + SubjectToken(deliveryID)
}

// HeldSubjects is the wildcard that matches every held delivery of
// subscriptionID, or of every subscription when subscriptionID is empty.
func (c Config) HeldSubjects(subscriptionID string) string {
	if subscriptionID == "" {
		return c.WithDefaults().Subject + ".held.>"
	}
	return c.WithDefaults().Subject + ".held." + SubjectToken(subscriptionID) + ".>"
}

// SubjectToken writes id as one subject token (see the package's subject
// scheme above); ParseSubjectToken reverses it.
func SubjectToken(id string) string {
	if plainToken(id) {
		return id
	}
	return "~" + base64.RawURLEncoding.EncodeToString([]byte(id))
}

// ParseSubjectToken returns the id that SubjectToken wrote as tok, and false
// when tok is not such a token.
func ParseSubjectToken(tok string) (string, bool) {
	if enc, ok := strings.CutPrefix(tok, "~"); ok {
		b, err := base64.RawURLEncoding.DecodeString(enc)
		if err != nil || len(b) == 0 || plainToken(string(b)) {
			return "", false
		}
		return string(b), true
	}
	return tok, plainToken(tok)
}

func plainToken(id string) bool {
	if id == "" {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
