// Package integration holds delaystream's tests against real Redis servers.
package integration
