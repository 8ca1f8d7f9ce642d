package ops_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/cli"
	"github.com/jetrelay/jetrelay/internal/ops"
	"github.com/jetrelay/jetrelay/proto"
)

func TestList_FiltersByStatusSubscriptionTenantTypeAndTime(t *testing.T) {
	e := newOpsEnv(t)
	now := time.Now().UTC()
	acme := e.subscription(t, "acme", "https://hooks.example.com/acme")
	globex := e.subscription(t, "globex", "https://hooks.example.com/globex")
	oldFailed := e.failed(t, acme, now.Add(-3*time.Hour))
	newFailed := e.failed(t, acme, now.Add(-10*time.Minute))
	pending := e.delivery(t, acme, proto.DeliveryPending, now.Add(-5*time.Minute))
	done := e.delivery(t, globex, proto.DeliverySuccess, now.Add(-time.Minute))

	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"everything, oldest first", nil, []string{oldFailed, newFailed, pending, done}},
		{"undelivered", []string{"--status", "undelivered"}, []string{oldFailed, newFailed, pending}},
		{"failed in the last hour", []string{"--status", "failed", "--since", "1h"}, []string{newFailed}},
		{"until an instant", []string{"--until", proto.FormatInstant(now.Add(-time.Hour))}, []string{oldFailed}},
		{"one subscription", []string{"--subscription", globex}, []string{done}},
		{"one tenant", []string{"--tenant", "acme", "--status", "PENDING"}, []string{pending}},
		{"event type that none has", []string{"--event-type", "tenant.created"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := e.cli(t, nil, append([]string{"deliveries", "list", "--json"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			var page ops.Page
			if err := json.Unmarshal([]byte(out), &page); err != nil {
				t.Fatalf("--json output does not parse: %v\n%s", err, out)
			}
			var got []string
			for _, r := range page.Rows {
				got = append(got, r.DeliveryID)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestList_PagesWithLimitAndOffsetAndPrintsATable(t *testing.T) {
	e := newOpsEnv(t)
	sub := e.subscription(t, "acme", "https://hooks.example.com/acme")
	var ids []string
	for i := range 5 {
		ids = append(ids, e.failed(t, sub, time.Now().Add(time.Duration(i-10)*time.Minute)))
	}
	p1, err := e.tool.List(context.Background(), ops.Filter{}, 0, 2)
	if err != nil || len(p1.Rows) != 2 || p1.NextOffset != 2 {
		t.Fatalf("page 1: %+v %v", p1, err)
	}
	p3, err := e.tool.List(context.Background(), ops.Filter{}, 4, 2)
	if err != nil || len(p3.Rows) != 1 || p3.NextOffset != 0 || p3.Rows[0].DeliveryID != ids[4] {
		t.Fatalf("last page: %+v %v", p3, err)
	}
	out, _, err := e.cli(t, nil, "deliveries", "list", "--limit", "2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"DELIVERY", "STATUS", ids[0], "FAILED", "HTTP 503", "shown: 2; more with --offset 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestList_BadFiltersGiveClearErrors(t *testing.T) {
	e := newOpsEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--status", "LOST"}, `status "LOST" is not PENDING, RETRYING, SUCCESS, FAILED or undelivered`},
		{[]string{"--since", "yesterday"}, `--since "yesterday" is not an RFC 3339 time`},
		{[]string{"--since", "1h", "--until", "2h"}, "is before --since"},
		{[]string{"--subscription", "whsub_nope"}, `no subscription "whsub_nope"`},
		{[]string{"--limit", "-1"}, "must not be negative"},
	} {
		_, _, err := e.cli(t, nil, append([]string{"deliveries", "list"}, tc.args...)...)
		if !errors.Is(err, ops.ErrBadFilter) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
	_, _, err := e.cli(t, nil, "deliveries", "requeue")
	if !errors.Is(err, ops.ErrBadFilter) {
		t.Errorf("requeue without ids or --status: err = %v", err)
	}
	_, _, err = e.cli(t, nil, "deliveries", "requeue", "--status", "PENDING")
	if !errors.Is(err, ops.ErrBadFilter) || !strings.Contains(err.Error(), "only --status FAILED") {
		t.Errorf("requeue --status PENDING: err = %v", err)
	}
}

func TestCommands_EachHasHelp(t *testing.T) {
	e := newOpsEnv(t)
	for _, args := range [][]string{
		{"deliveries", "list", "--help"}, {"deliveries", "inspect", "--help"}, {"deliveries", "requeue", "--help"},
		{"quarantine", "list", "--help"}, {"quarantine", "requeue", "--help"}, {"status", "--help"},
		{"events", "emit", "--help"},
	} {
		// Its own flags and --json; run's settings are named, not listed.
		stdout, _, err := e.cli(t, nil, args...)
		if err != nil || !strings.Contains(stdout, "jetrelay "+strings.Join(args[:len(args)-1], " ")) || !strings.Contains(stdout, "--json") ||
			!strings.Contains(stdout, "jetrelay run --help") || strings.Contains(stdout, "--workers") {
			t.Errorf("%v: err=%v, help:\n%s", args, err, stdout)
		}
	}
	for _, family := range []string{"deliveries", "quarantine", "events"} {
		out, _, err := e.cli(t, nil, family, "--help")
		if err != nil || !strings.Contains(out, "Available Commands:") {
			t.Errorf("%s --help: err=%v\n%s", family, err, out)
		}
	}
}

func TestCommands_FlagsAfterArgumentsAndUsageErrors(t *testing.T) {
	e := newOpsEnv(t)
	// A flag after the positional argument is parsed as a flag.
	_, _, err := e.cli(t, nil, "deliveries", "inspect", "whdel_missing", "--json")
	if err == nil || cli.IsUsage(err) || !strings.Contains(err.Error(), "whdel_missing") {
		t.Errorf("inspect ID --json: err = %v, want the lookup of whdel_missing to fail, not a usage error", err)
	}
	for _, args := range [][]string{
		{"deliveries", "inspect"},
		{"deliveries", "list", "stray"},
		{"deliveries", "lost"},
		{"deliveries"},
		{"status", "--no-such-flag"},
		{"deliveries", "list", "--limit", "many"},
	} {
		if _, _, err := e.cli(t, nil, args...); !cli.IsUsage(err) {
			t.Errorf("%v: err = %v, want a usage error", args, err)
		}
	}
}
