package subscriptions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/cli"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// settingsView is what `subscriptions settings` prints of a settings record:
// the settings, and of the secret rotation only whether a previous secret is
// still signing and until when, never a secret.
type settingsView struct {
	SubscriptionID      string         `json:"subscription_id"`
	StandardWebhooks    *bool          `json:"standard_webhooks"`
	PreviousSecretUntil *proto.Instant `json:"previous_secret_until,omitempty"`
}

// subscriptionsSettings is `subscriptions settings ID [flags]`: jetrelay's
// own settings of a subscription (jetrelay:subscription:{id}), printed as
// JSON, after the flags given are written.
func subscriptionsSettings(getenv func(string) string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "settings ID [--standard-webhooks true|false|default]",
		Short: "jetrelay's own settings (kept where admin's edits cannot erase them)",
		Args:  cli.ExactArgs(1, "ID"),
	}
	var sf storeFlags
	sf.register(cmd.Flags(), getenv)
	var patch store.Patch
	cmd.Flags().Func("standard-webhooks", "true: sign with Standard Webhooks headers too; false: X-Cycles-Signature only; default: follow JETRELAY_STANDARD_WEBHOOKS", func(v string) error {
		f, err := optionalBool(v)
		if err != nil {
			return err
		}
		patch = append(patch, store.Field{Name: "standard_webhooks", Value: f})
		return nil
	})
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		rdb, _, err := sf.open()
		if err != nil {
			return err
		}
		defer rdb.Close()
		st := store.New(rdb)
		id := pos[0]
		if _, err := st.SubscriptionRaw(ctx, id); errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("subscriptions settings: %w: %s", admin.ErrSubscriptionNotFound, strconv.Quote(id))
		} else if err != nil {
			return fmt.Errorf("subscriptions settings: %w", err)
		}
		var set *proto.SubscriptionSettings
		if len(patch) > 0 {
			set, err = st.UpdateSettings(ctx, id, func(*proto.SubscriptionSettings) (store.Patch, error) { return patch, nil })
		} else {
			set, _, err = st.Settings(ctx, id)
		}
		if err != nil {
			return fmt.Errorf("subscriptions settings: %w", err)
		}
		view := settingsView{SubscriptionID: id, StandardWebhooks: set.StandardWebhooks}
		if set.PreviousSecret != "" {
			view.PreviousSecretUntil = set.PreviousSecretUntil
		}
		out, err := json.Marshal(view)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", out)
		return err
	}
	return cmd
}

// setStandardWebhooks writes a new subscription's Standard Webhooks setting.
func setStandardWebhooks(ctx context.Context, rdb *redis.Client, id string, v any) error {
	_, err := store.New(rdb).UpdateSettings(ctx, id, func(*proto.SubscriptionSettings) (store.Patch, error) {
		return store.Patch{{Name: "standard_webhooks", Value: v}}, nil
	})
	return err
}

// optionalBool reads true, false or default (nil: the fleet's setting).
func optionalBool(v string) (any, error) {
	switch v {
	case "default":
		return nil, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, errors.New("want true, false or default")
	}
	return b, nil
}
