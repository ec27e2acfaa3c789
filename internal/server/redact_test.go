package server

import "testing"

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://postgres:S3cret@127.0.0.1:5432/x":        "postgres://postgres:***@127.0.0.1:5432/x",
		"postgres://u@h/db?password=S3cretQ&sslmode=disable": "postgres://u@h/db?password=***&sslmode=disable",
		"postgres://u@h/db":  "postgres://u@h/db",
		"sqlite:rollcall.db": "sqlite:rollcall.db",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
