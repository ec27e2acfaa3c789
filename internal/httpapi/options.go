package httpapi

import (
	"context"
	"log/slog"
)

// Options configures the handler.
type Options struct {
	// Log receives one record per request (method, path, status, duration;
	// never the Authorization header) and the cause of every 500.
	// nil = slog.Default().
	Log *slog.Logger
	// Ready reports whether the server can serve (GET /readyz). nil = a
	// cheap store query that must succeed.
	Ready func(ctx context.Context) error
}
