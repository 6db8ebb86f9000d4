// Package bridge hands package dstest what package delaystream keeps to
// itself: the handler and options an application gave Queue.Handle, and
// a group option that judges message deadlines by a test's clock.
// Package delaystream sets its functions when it is initialised; nothing
// else may.
package bridge
