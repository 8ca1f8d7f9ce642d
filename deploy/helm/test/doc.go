// Package test renders deploy/helm/jetrelay with several value sets and
// decodes every object strictly into the Kubernetes API types. It is a
// module of its own so that Helm and the Kubernetes libraries stay out of
// jetrelay's go.mod; `go tool task test` runs it (`cd deploy/helm/test &&
// go test ./...`).
package test
