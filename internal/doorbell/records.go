package doorbell

import (
	"sync"

	"github.com/rollcall/rollcall/internal/store"
)

// maxQueuedRecords bounds the ring records waiting to be written; a ring
// past it is not recorded (it does not count against the ring budget).
const maxQueuedRecords = 4096

// maxRecordBatch bounds the ring records written in one transaction.
const maxRecordBatch = 64

// records holds the ring records not written yet (design: Ring budget).
// They leave queued only under writing, and are written before it is let
// go, so whoever holds writing knows every record taken before is
// written.
type records struct {
	writing sync.Mutex // held while records are taken and written
	qmu     sync.Mutex // guards queued
	queued  []store.MarkRungParams
	wake    chan struct{} // holds a token when records were queued since the recorder last looked
	full    chan struct{} // holds a token when a whole batch is queued
}
