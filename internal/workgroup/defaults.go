package workgroup

import (
	"log/slog"

	"github.com/jonboulle/clockwork"
)

// Defaults fills in the clock and logger a background engine runs on when
// its configuration leaves them nil: the real clock and slog.Default().
// Every engine (the service, the doorbell, the evaluator, the tracker, the
// event and connection hubs) starts from these two.
func Defaults(clock *clockwork.Clock, log **slog.Logger) {
	if *clock == nil {
		*clock = clockwork.NewRealClock()
	}
	if *log == nil {
		*log = slog.Default()
	}
}
