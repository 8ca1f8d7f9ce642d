package proto

import (
	"reflect"
	"testing"
)

func TestDropReservedHeaders_KeepsOwnHeadersAndNamesTheDroppedOnes(t *testing.T) {
	in := map[string]string{"Content-Type": "text/plain", "x-cycles-tenant": "acme", "X-Request-Id": "r", "Authorization": "Bearer t", "X-Team": "payments"}
	kept, dropped := DropReservedHeaders(in)
	if want := map[string]string{"Authorization": "Bearer t", "X-Team": "payments"}; !reflect.DeepEqual(kept, want) {
		t.Errorf("kept = %v, want %v", kept, want)
	}
	if want := []string{"Content-Type", "X-Request-Id", "x-cycles-tenant"}; !reflect.DeepEqual(dropped, want) {
		t.Errorf("dropped = %v, want %v", dropped, want)
	}
	if len(in) != 5 {
		t.Errorf("the subscription's own map was modified: %v", in)
	}
}

func TestDropReservedHeaders_ReturnsHeadersUntouchedWhenNoneIsReserved(t *testing.T) {
	in := map[string]string{"Authorization": "Bearer t"}
	kept, dropped := DropReservedHeaders(in)
	if dropped != nil || !reflect.DeepEqual(kept, in) {
		t.Errorf("kept %v dropped %v", kept, dropped)
	}
	if kept, dropped := DropReservedHeaders(nil); kept != nil || dropped != nil {
		t.Errorf("nil headers: kept %v dropped %v", kept, dropped)
	}
}
