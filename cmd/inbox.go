package jetrelaycmd

import (
	"context"
	"io"

	"github.com/jetrelay/jetrelay/internal/inbox"
)

// cmdInbox is `jetrelay inbox serve|list|inspect|replay|purge`; internal/inbox
// holds all of it.
func cmdInbox(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return inbox.Command(ctx, args, stdout, stderr)
}
