package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// writeJSON writes v as a JSON response with the status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding the response: %w", err)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
	return nil
}

// answer writes v with status, or returns err when the use case failed.
func answer(w http.ResponseWriter, status int, v any, err error) error {
	if err != nil {
		return err
	}
	return writeJSON(w, status, v)
}
