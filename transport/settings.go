package transport

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
)

// Setting is one operator setting a driver reads through Env.Getenv. The
// host accepts it as an environment variable and as a flag, lists it in
// `jetrelay run --help`, and checks it when it loads its configuration,
// before anything starts, so a typo fails start-up with the setting's name.
type Setting struct {
	// Env is the environment variable, e.g. JETRELAY_SQS_ENDPOINT.
	Env string
	// Flag is the flag name without dashes, e.g. sqs-endpoint.
	Flag string
	// Default is the value when neither is given; "" for none.
	Default string
	// Usage says what it does, in one line.
	Usage string
	// Check, if set, validates a value (the default included). Its error
	// must not quote the value: a setting may carry a credential.
	Check func(value string) error
}

// Describer is implemented by a driver that has settings. Settings must
// return the same list on every call.
type Describer interface {
	Settings() []Setting
}

// DriverSettings lists the settings of every registered driver that
// describes them, ordered by driver scheme, each driver once (http and
// https share theirs).
func DriverSettings() []Setting {
	drivers.RLock()
	table := maps.Clone(drivers.m)
	drivers.RUnlock()
	var out []Setting
	seen := make(map[any]bool)
	for _, scheme := range slices.Sorted(maps.Keys(table)) {
		d, ok := table[scheme].(Describer)
		if !ok {
			continue
		}
		if reflect.TypeOf(d).Comparable() {
			if seen[d] {
				continue
			}
			seen[d] = true
		}
		out = append(out, d.Settings()...)
	}
	return slices.CompactFunc(out, func(a, b Setting) bool { return a.Env == b.Env })
}

// CheckSettings validates every driver setting as getenv answers it (the
// default when it answers ""), and returns the first failure naming the
// setting.
func CheckSettings(getenv func(string) string) error {
	for _, s := range DriverSettings() {
		if s.Check == nil {
			continue
		}
		v := cmp.Or(getenv(s.Env), s.Default)
		if err := s.Check(v); err != nil {
			return fmt.Errorf("%s (--%s): %w", s.Env, s.Flag, err)
		}
	}
	return nil
}
