package server

import "fmt"

// A password in a store URL, in the user part or as a parameter, is
// masked; other URLs pass unchanged.
func ExampleRedact() {
	for _, u := range []string{
		"postgres://postgres:S3cret@127.0.0.1:5432/x",
		"postgres://u@h/db?password=S3cretQ&sslmode=disable",
		"postgres://u@h/db",
		"sqlite:rollcall.db",
	} {
		fmt.Println(Redact(u))
	}
	// Output:
	// postgres://postgres:***@127.0.0.1:5432/x
	// postgres://u@h/db?password=***&sslmode=disable
	// postgres://u@h/db
	// sqlite:rollcall.db
}
