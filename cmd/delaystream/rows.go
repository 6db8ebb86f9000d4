package main

import (
	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/cmd/delaystream/internal/cli"
)

// The documents peek, get, dlq and quarantine print with --json: admin's,
// each with a short preview of its payload (see cli.Preview).

// waitingRow is a waiting message.
type waitingRow struct {
	admin.WaitingMessage
	Preview string `json:"preview"`
}

// deadRow is a dead letter.
type deadRow struct {
	Group string `json:"group,omitempty"` // in listings of every group's
	delaystream.DeadLetterEntry
	Preview string `json:"preview"`
}

// quarantineRow is a quarantined entry; its preview is of its payload
// when its envelope decodes, else of its raw envelope, or of its member
// when it has none.
type quarantineRow struct {
	delaystream.Quarantined
	Preview string `json:"preview"`
}

func waitingRows(ms []admin.WaitingMessage) []waitingRow {
	out := make([]waitingRow, len(ms))
	for i, m := range ms {
		out[i] = waitingRow{m, cli.Preview(m.Payload, cli.PreviewLen)}
	}
	return out
}

func deadRows(ds []delaystream.DeadLetterEntry) []deadRow {
	out := make([]deadRow, len(ds))
	for i, d := range ds {
		out[i] = deadRow{DeadLetterEntry: d, Preview: cli.Preview(d.Payload, cli.PreviewLen)}
	}
	return out
}

func quarantineRows(qs []delaystream.Quarantined) []quarantineRow {
	out := make([]quarantineRow, len(qs))
	for i, q := range qs {
		out[i] = quarantineRow{q, cli.Preview(q.Content(), cli.PreviewLen)}
	}
	return out
}
