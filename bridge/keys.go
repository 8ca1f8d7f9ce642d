package bridge

import "github.com/jetrelay/jetrelay/internal/store"

// RegistryKey is the Redis SET of every bridge instance id that has run and
// may still hold ids in its processing list (store.BridgesSet).
const RegistryKey = store.BridgesSet

// HeartbeatKey is the key whose presence says bridge instance id is alive.
func HeartbeatKey(id string) string { return store.HeartbeatKey(id) }

// ProcessingKey is bridge instance id's processing list: ids moved out of
// dispatch:pending whose publication to JetStream is not yet confirmed.
func ProcessingKey(id string) string { return store.ProcessingList(id) }
