package bridge

import (
	"context"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
)

// DefaultLegacyProcessingIdle is upstream's dispatch.processing.recovery-idle-ms
// (DISPATCH_PROCESSING_RECOVERY_IDLE_MS) default.
const DefaultLegacyProcessingIdle = 2 * time.Minute

// adoptLegacy moves into this bridge's processing list the entries of the
// reference's dispatch:processing list whose claim has been idle for
// LegacyProcessingIdle, a chunk per script call.
func (b *Bridge) adoptLegacy(ctx context.Context) (int, error) {
	n, err := b.store.AdoptLegacy(ctx, b.processingKey, time.Now(), b.cfg.LegacyProcessingIdle, adoptChunk)
	if err != nil {
		return 0, err
	}
	if n > 0 {
		b.adopted.Add(uint64(n))
		b.log.Info("adopted idle entries of the reference service's processing list", "list", store.LegacyProcessingList, "ids", n)
	}
	return n, nil
}
