// Package cron gives delaystream's recurring schedules cron specs with an
// IANA time zone, computed by github.com/netresearch/go-cron (a maintained
// fork of robfig/cron v3, with its syntax):
//
//	spec, err := cron.New("0 9 * * MON", "Europe/Berlin") // Mondays 09:00 Berlin time
//	q, err := delaystream.New(rdb, "mail", cron.Option())
//	_, err = q.DefineRecurring(ctx, delaystream.Recurring{ID: "digest", Spec: spec, Payload: p})
//
// Every process that runs the queue should be built with [Option], so
// that it can compute the schedules' occurrences; one that is not warns
// once and leaves them to the others.
//
// Expressions have five fields (minute, hour, day of month, month, day
// of week) and an optional leading seconds field, or a descriptor
// (@hourly, @daily, @weekly, @monthly, @yearly). "@every" is refused: use
// delaystream.Every, whose occurrences do not depend on when the schedule
// was defined.
//
// Daylight-saving transitions are handled as go-cron defines them: a time
// that does not exist in the zone (02:30 on the night the clocks spring
// forward in Berlin) fires at the same wall time after the change (03:30),
// and a time that occurs twice (02:30 on the night they fall back) fires
// at both of its instants, an hour apart. A spec that must fire once a
// day whatever the zone's rules is best written in UTC.
package cron
