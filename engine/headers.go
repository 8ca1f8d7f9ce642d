package engine

import "github.com/jetrelay/jetrelay/proto"

// HeaderDropObserver is an optional extension of Observer: an Observer that
// implements it is told of every reserved custom header left out of a send.
type HeaderDropObserver interface {
	// HeaderDropped: a subscription's custom header named name (as stored)
	// is reserved (proto.ReservedHeader) and was not sent.
	HeaderDropped(l Labels, name string)
}

// customHeaders is what a send carries of a subscription's custom headers:
// reserved names are dropped with a warning and the delivery still goes out,
// as the reference does since 0.1.25.18. Failing instead would turn a
// harmless stored "Content-Type" into a subscription disabled after
// disable_after_failures deliveries.
func (e *Engine) customHeaders(log *handlingLog, lab Labels, headers map[string]string) map[string]string {
	kept, dropped := proto.DropReservedHeaders(headers)
	if len(dropped) == 0 {
		return kept
	}
	// Names only: values may carry credentials.
	log.Warn("reserved custom headers dropped from the request; the relay sets them itself", "headers", dropped)
	if o, ok := e.obs.(HeaderDropObserver); ok {
		for _, name := range dropped {
			o.HeaderDropped(lab, name)
		}
	}
	return kept
}
