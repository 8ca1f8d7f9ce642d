// Package config is jetrelay's run-time configuration: one plain struct,
// read from the reference service's environment names (REDIS_HOST,
// MAX_DELIVERY_AGE_MS, …) and jetrelay's own JETRELAY_* names, each with a
// matching command-line flag. Defaults are applied and the result validated
// in one place, before anything starts.
package config
