package store

import (
	"context"
	"errors"
	"testing"

	"github.com/jetrelay/jetrelay/proto"
)

func TestSettings_AbsentRecordIsAllDefaults(t *testing.T) {
	st, _, _ := newStore(t)
	ctx := context.Background()
	set, raw, err := st.Settings(ctx, "sub_none")
	if err != nil || raw != nil || set == nil {
		t.Fatalf("Settings of a subscription without a record = %v, %q, %v; want defaults, nil, nil", set, raw, err)
	}
}

func TestSettings_UpdateCreatesTheRecordAndKeepsFieldsItDoesNotKnow(t *testing.T) {
	st, rdb, _ := newStore(t)
	ctx := context.Background()
	key := SettingsKey("sub_1")
	// A newer release's field, which this one must keep.
	if err := rdb.Set(ctx, key, `{"from_the_future":{"x":1}}`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateSettings(ctx, "sub_1", func(*proto.SubscriptionSettings) (Patch, error) {
		return Patch{{Name: "some_setting", Value: "v"}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	got, _ := rdb.Get(ctx, key).Result()
	if want := `{"from_the_future":{"x":1},"some_setting":"v"}`; got != want {
		t.Fatalf("settings record = %s, want %s", got, want)
	}
	if _, err := st.UpdateSettings(ctx, "sub_2", func(*proto.SubscriptionSettings) (Patch, error) {
		return Patch{{Name: "some_setting", Value: true}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, _ := rdb.Get(ctx, SettingsKey("sub_2")).Result(); got != `{"some_setting":true}` {
		t.Fatalf("new settings record = %s", got)
	}
}

func TestSettings_UnreadableRecordIsCorruptNotDefaults(t *testing.T) {
	st, rdb, _ := newStore(t)
	ctx := context.Background()
	if err := rdb.Set(ctx, SettingsKey("sub_bad"), `[1,2]`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Settings(ctx, "sub_bad"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Settings of an unreadable record: err = %v, want ErrCorrupt", err)
	}
	d := &proto.Delivery{DeliveryID: "d1", EventID: "e1", SubscriptionID: "sub_bad"}
	b, err := st.Load(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(b.SettingsErr, ErrCorrupt) {
		t.Fatalf("Load: SettingsErr = %v, want ErrCorrupt (never silently the defaults)", b.SettingsErr)
	}
}
