package doorbell

import (
	"time"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
)

// pooling is the engine's pool routing state (design: Pool routing).
type pooling struct {
	pool []poolRing // pooled rings made here, watched
	bus  bus.Bus    // tells every instance of a pooled todo to route
}

// poolRing is a ring of a pooled todo this instance made and watches.
type poolRing struct {
	r      domain.TodoReady
	member string
	due    time.Time
}
