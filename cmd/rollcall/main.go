// Command rollcall is the Rollcall server and its command-line client.
//
//	rollcall serve              run the server (SQLite by default)
//	rollcall migrate            apply database migrations and exit
//	rollcall agent vend …       client commands over the REST API
//
// See README.md and DESIGN.md §2 (CLI).
package main

import (
	"os"

	"github.com/rollcall/rollcall/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
