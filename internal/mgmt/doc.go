// Package mgmt serves jetrelay's management endpoints on the management port
// (MANAGEMENT_PORT, 9980 like the reference service): /healthz answers while
// the process runs, /readyz only while every dependency check passes.
package mgmt
