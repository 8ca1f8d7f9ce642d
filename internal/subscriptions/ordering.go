package subscriptions

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/cli"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// subscriptionsOrdering shows or sets a subscription's own ordering mode.
// It lives in jetrelay:subscription:{id} (admin's edits keep it) and in the
// jetrelay:ordering index the bridges route by; "default" removes it, so
// the fleet default (JETRELAY_ORDERING) applies.
func subscriptionsOrdering(getenv func(string) string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ordering ID [none|first-attempt|strict|default]",
		Short: "show or set the ordering of its deliveries (docs/ordering.md)",
		Args:  cli.RangeArgs(1, 2, "ID [none|first-attempt|strict|default]"),
	}
	var sf storeFlags
	sf.register(cmd.Flags(), getenv)
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		var err error
		var mode proto.Ordering
		if len(pos) == 2 && pos[1] != "default" {
			if mode, err = proto.ParseOrdering(pos[1]); err != nil || mode == "" {
				return fmt.Errorf("subscriptions ordering: mode %s is not none, first-attempt, strict or default", strconv.Quote(pos[1]))
			}
		}
		rdb, _, err := sf.open()
		if err != nil {
			return err
		}
		defer rdb.Close()
		st := store.New(rdb)
		if _, err := st.SubscriptionRaw(ctx, pos[0]); errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("subscriptions ordering: %w: %s", admin.ErrSubscriptionNotFound, strconv.Quote(pos[0]))
		} else if err != nil {
			return fmt.Errorf("subscriptions ordering: %w", err)
		}
		if len(pos) == 2 {
			if err := st.SetOrdering(ctx, pos[0], mode); err != nil {
				return fmt.Errorf("subscriptions ordering: %w", err)
			}
		}
		set, _, err := st.Settings(ctx, pos[0])
		if err != nil {
			return fmt.Errorf("subscriptions ordering: %w", err)
		}
		_, err = fmt.Fprintf(stdout, "%s: %s\n", pos[0], DescribeOrdering(proto.Ordering(set.Ordering), proto.Ordering(getenv("JETRELAY_ORDERING"))))
		return err
	}
	return cmd
}

// DescribeOrdering says which mode applies and where it comes from: the
// subscription's own setting, or the fleet default (as far as this process
// knows it: JETRELAY_ORDERING in its environment, none when unset).
func DescribeOrdering(own, fleet proto.Ordering) string {
	if own != "" {
		return string(own) + " (own setting)"
	}
	return string(fleet.Or(proto.OrderingNone)) + " (fleet default JETRELAY_ORDERING)"
}
