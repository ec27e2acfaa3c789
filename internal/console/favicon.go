package console

import (
	"net/http"
)

// Favicon serves GET /favicon.ico (the console's icon; browsers ask for it
// on every origin they visit), cacheable for a day.
func Favicon(w http.ResponseWriter, r *http.Request) {
	b, err := staticFS.ReadFile("static/favicon.ico")
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "image/x-icon")
	w.Header().Set("Cache-Control", "public, max-age=86400")
	_, _ = w.Write(b)
}
