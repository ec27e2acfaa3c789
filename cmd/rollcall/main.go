// Command rollcall is the Rollcall server and its command-line client.
//
//	rollcall serve              run the server (SQLite by default)
//	rollcall migrate            apply database migrations and exit
//	rollcall agent create …     client commands over the REST API:
//	                            NOUN create|list|show|update|delete|revoke
//
// See README.md and `rollcall --help`.
package main

import (
	"os"

	"github.com/rollcall/rollcall/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
