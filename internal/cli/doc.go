// Package cli holds the command-line conventions every jetrelay command
// family shares: which errors are usage errors (exit status 2, one line and
// a pointer to --help) and the argument checks and command groups that
// produce them. The commands themselves live with their packages; the root
// command and the exit rule live in package jetrelaycmd (cmd/).
package cli
