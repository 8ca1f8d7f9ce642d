package sqs_test

import (
	"context"
	"testing"

	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/transporttest"
)

func TestDeliver_AQueueThatDoesNotExistIsAnAnswerWithItsOwnReason(t *testing.T) {
	env := testenv.SQS(t)
	res, err := newTransport(t, env.Endpoint).Deliver(context.Background(), transporttest.NewRequest(env.SubscriptionURL("never-created"), "missing"))
	if err != nil {
		t.Fatalf("Deliver to a missing queue returned error %v; want an answer (SQS refused)", err)
	}
	if res.Outcome != transport.Failed || res.Reason != "sqs_queue_not_found" || res.StatusCode == 0 {
		t.Errorf("Deliver to a missing queue = %+v; want Failed with Reason sqs_queue_not_found and SQS's status code", res)
	}
}

func TestDeliver_SQSThrottlingIsAnsweredAsThrottledWithItsOwnReason(t *testing.T) {
	env := testenv.SQS(t)
	proxy := behavingProxy(t, env)
	res, err := newTransport(t, proxy).Deliver(context.Background(), transporttest.NewRequest(env.SubscriptionURL("throttle-q"), "throttled"))
	if err != nil || res.Outcome != transport.Throttled || res.Reason != "sqs_throttled" {
		t.Errorf("Deliver to a throttling SQS = %+v, %v; want Throttled with Reason sqs_throttled", res, err)
	}
}
