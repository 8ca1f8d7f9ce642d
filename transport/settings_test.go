package transport_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jetrelay/jetrelay/transport"
)

// describedDriver has one setting that must be "ok".
type describedDriver struct{ countingDriver }

func (describedDriver) Settings() []transport.Setting {
	return []transport.Setting{{Env: "TEST_SETTING_MODE", Flag: "test-mode", Default: "ok", Usage: "a test setting",
		Check: func(v string) error {
			if v != "ok" {
				return errors.New("must be ok")
			}
			return nil
		}}}
}

func TestDriverSettings_ListADriversSettingsOnceAndCheckThemByName(t *testing.T) {
	d := &describedDriver{}
	transport.Register("test-described-a", d)
	transport.Register("test-described-b", d)
	var n int
	for _, s := range transport.DriverSettings() {
		if s.Env == "TEST_SETTING_MODE" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("TEST_SETTING_MODE listed %d times for a driver registered under two schemes, want once", n)
	}
	if err := transport.CheckSettings(func(string) string { return "" }); err != nil {
		t.Errorf("the default failed its own check: %v", err)
	}
	err := transport.CheckSettings(func(k string) string { return map[string]string{"TEST_SETTING_MODE": "bad"}[k] })
	if err == nil || !strings.Contains(err.Error(), "TEST_SETTING_MODE (--test-mode)") {
		t.Errorf("CheckSettings with a bad value = %v, want an error naming TEST_SETTING_MODE (--test-mode)", err)
	}
	if !slices.Contains(transport.Drivers(), "test-described-a") {
		t.Errorf("Drivers() = %v lacks test-described-a", transport.Drivers())
	}
}

// strictDriver accepts only strict://ok URLs.
type strictDriver struct{ countingDriver }

func (strictDriver) ValidateURL(raw string) error {
	if raw != "strict://ok" {
		return errors.New("strict: only strict://ok")
	}
	return nil
}

func TestValidateURL_AsksTheSchemesDriverBeforeStoringAndBeforeEveryDelivery(t *testing.T) {
	transport.Register("strict", &strictDriver{})
	if err := transport.ValidateURL("strict://ok"); err != nil {
		t.Errorf("ValidateURL(strict://ok) = %v", err)
	}
	if err := transport.ValidateURL("strict://nope"); err == nil {
		t.Error("ValidateURL(strict://nope) accepted a URL its driver refuses")
	}
	if err := transport.ValidateURL("nosuch://x"); !errors.Is(err, transport.ErrUnsupportedScheme) {
		t.Errorf("ValidateURL(nosuch://x) = %v, want ErrUnsupportedScheme", err)
	}
	reg, err := transport.OpenRegistry(t.Context(), transport.Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	tr, err := reg.Lookup("strict://nope")
	if err != nil {
		t.Fatalf("Lookup(strict://nope) = %v", err)
	}
	if _, err := tr.Deliver(t.Context(), &transport.Request{URL: "strict://nope"}); !errors.Is(err, transport.ErrPermanent) {
		t.Errorf("Deliver(strict://nope) = %v, want a permanent error from the driver's check", err)
	}
	if _, err := tr.Deliver(t.Context(), &transport.Request{URL: "strict://ok"}); err != nil {
		t.Errorf("Deliver(strict://ok) = %v, want the transport's own answer", err)
	}
}
