// Package loctest picks places out of a delaystream.Location for tests:
// the places in consumer groups, those of one kind, the waiting one.
package loctest
