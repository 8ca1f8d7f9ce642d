package transport

// ReasonOther is the reason the engine records for an answer whose Reason
// is not a valid token: the answer still counts as "answered no", and a bad
// token cannot add a metric series.
const ReasonOther = "answer_other"

// maxReasonLen bounds a Reason: it becomes a metric label value.
const maxReasonLen = 32

// ValidReason reports whether s may be a Result's Reason: 1 to 32 lowercase
// ASCII letters, digits and underscores, starting with a letter, and none of
// the engine's own reasons for sends that got no answer ("transport_error",
// "ssrf_blocked"), which would make "answered no" look like "no answer".
func ValidReason(s string) bool {
	if s == "" || len(s) > maxReasonLen || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return s != "transport_error" && s != "ssrf_blocked"
}

// AnswerReason is the metric reason of an answer that declared one: its
// Reason when valid, ReasonOther otherwise, "" when it declared none (an
// HTTP answer, whose reason the engine derives from the status code).
func AnswerReason(res Result) string {
	switch {
	case res.Reason == "":
		return ""
	case ValidReason(res.Reason):
		return res.Reason
	}
	return ReasonOther
}
