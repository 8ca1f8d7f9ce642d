package testenv

import (
	"context"
	"testing"
)

func TestRedis_ClientReachesAFreshServer(t *testing.T) {
	env := Redis(t)
	ctx := context.Background()
	if n := env.Client.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("new server holds %d keys, want an empty one", n)
	}
	if err := env.Client.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET through env.Client: %v", err)
	}
}
