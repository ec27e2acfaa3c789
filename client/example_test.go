package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/client"
	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/httpapi"
	"github.com/rollcall/rollcall/internal/store/sqlite"
)

// startServer starts a real in-process Rollcall stack (SQLite store, use
// cases, REST handler) on loopback and returns its URL, the bootstrap
// person's token and a function that stops it.
func startServer(ctx context.Context) (url, token string, stop func()) {
	dir, err := os.MkdirTemp("", "rollcall-example-")
	if err != nil {
		log.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(dir, "r.db"))
	if err != nil {
		log.Fatal(err)
	}
	svc := app.New(app.Options{Store: st, Log: slog.New(slog.DiscardHandler)})
	token, _, err = svc.Bootstrap(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(svc, httpapi.Options{Log: slog.New(slog.DiscardHandler)}))
	svc.SetPublicURL(srv.URL)
	return srv.URL, token, func() {
		srv.Close()
		_ = svc.StopLiveness(context.Background())
		svc.Close()
		_ = st.Close()
		_ = os.RemoveAll(dir)
	}
}

func ExampleClient() {
	ctx := context.Background()
	base, token, stop := startServer(ctx)
	defer stop()

	c := client.New(base, token)
	res, err := c.VendAgent(ctx, wire.VendInput{Handle: "builder", Queues: []string{"build"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("vended", res.Agent.Handle)

	todo, created, err := c.PushTodo(ctx, "builder", wire.PushInput{Queue: "build", Title: "compile the docs"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pushed", todo.Title, "created:", created)

	_, err = c.GetAgent(ctx, "nobody")
	fmt.Println("unknown agent status:", client.StatusOf(err))
	var ce *client.Error
	if errors.As(err, &ce) {
		fmt.Println("problem code:", ce.Code())
	}
	// Output:
	// vended builder
	// pushed compile the docs created: true
	// unknown agent status: 404
	// problem code: not_found
}
