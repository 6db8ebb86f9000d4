// Package health answers the probes of the exporter and the web view:
// /healthz, whether Redis answers (for a liveness or readiness probe, cheap
// and naming nothing), and /health, whether the queues are being served:
// Redis answers, no server is full or can evict, every queue's promotion
// keeps up with its due messages, and every consumer group with work has a
// live consumer. /health answers 200 when no check fails and 503 when one
// does, in text (a line per check) or, asked for with Accept:
// application/json or ?format=json, in JSON.
package health
