package engine

import (
	"strings"

	"github.com/jetrelay/jetrelay/proto"
)

// checkPayload runs the validator on ev: a warning and a metric per broken
// rule, never a refusal (the reference delivers such events too).
func (e *Engine) checkPayload(log *handlingLog, ev *proto.Event) {
	rules := proto.PayloadViolations(ev)
	if len(rules) == 0 {
		return
	}
	for _, r := range rules {
		e.obs.PayloadInvalid(ev.EventType, r)
	}
	log.Warn("event payload breaks the reference validator's rules; delivering it anyway",
		"event_type", oneLine(ev.EventType), "rules", strings.Join(rules, ","))
}

// oneLine replaces CR and LF, as the reference does in logged ids and types.
func oneLine(s string) string {
	return strings.NewReplacer("\r", "_", "\n", "_").Replace(s)
}
