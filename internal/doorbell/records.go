package doorbell

import (
	"sync"
	"time"

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
	wake    chan struct{} // holds a token when records were queued since RunRecorder last looked
	full    chan struct{} // holds a token when a whole batch is queued
}

// recordDelay is how long RunRecorder lets ring records gather before it
// writes them (at once when a whole batch is queued). Why: on SQLite a
// transaction per ring took the one writer just as the next push wanted
// it (push → doorbell p50 0.59 ms, against 0.50 ms with records gathered
// this long); a record written up to this much later changes nothing the
// sweep decides on (design: Ring on create).
const recordDelay = 50 * time.Millisecond
