package receive_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A receiver that only verifies signatures links package receive alone, so
// it must not drag in a Redis, PostgreSQL, NATS or AWS client: those live in
// the store and adapter subpackages.
func TestReceive_DependsOnNoRedisPostgresNATSOrAWSClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/jetrelay/jetrelay/transport/receive").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/redis/", "github.com/jackc/", "github.com/nats-io/", "github.com/aws/"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("package receive depends on %s", dep)
			}
		}
	}
}
