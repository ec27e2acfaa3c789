package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/rollcall/rollcall/internal/testkit/harness"
)

const loadAdminToken = "rcp_load-admin-token-0123456789abcdef0123456789abcd"

// target is the server under load.
type target struct {
	URL   string
	Token string
	PID   int // 0 when not spawned
	stop  func()
}

// targetFlags are a mode's flags naming the server under load: -spawn
// (and -store), or -server and -token.
type targetFlags struct {
	bin, store, server, token *string
	loopback                  bool // -server must name a loopback address
}

// addTargetFlags defines -spawn and -store on fs, and -server and -token
// unless serverHelp is "" (the mode must spawn).
func addTargetFlags(fs *flag.FlagSet, spawnHelp, serverHelp string, loopback bool) *targetFlags {
	f := &targetFlags{bin: fs.String("spawn", "", spawnHelp), store: fs.String("store", "", "store URL for the spawned server (default: temp SQLite)"),
		server: new(string), token: new(string), loopback: loopback}
	if serverHelp != "" {
		f.server, f.token = fs.String("server", "", serverHelp), fs.String("token", "", "admin token when not spawning")
	}
	return f
}

// open spawns or attaches to the server the flags name (spawnOrAttach),
// extra going to a spawned `serve`.
func (f *targetFlags) open(ctx context.Context, extra ...string) (*target, error) {
	if f.loopback && *f.server != "" {
		if err := requireLoopback(*f.server); err != nil {
			return nil, err
		}
	}
	return spawnOrAttach(ctx, *f.bin, *f.store, *f.server, *f.token, extra...)
}

// spawnOrAttach starts `<bin> serve` on a free loopback port with a fresh
// store (store "" = temp SQLite file) when bin is set, else uses url+token.
func spawnOrAttach(ctx context.Context, bin, storeURL, url, token string, extra ...string) (*target, error) {
	if bin == "" {
		if url == "" || token == "" {
			return nil, fmt.Errorf("give -spawn <rollcall binary> or -server and -token")
		}
		return &target{URL: url, Token: token, stop: func() {}}, nil
	}
	dir, err := os.MkdirTemp("", "rollcall-load")
	if err != nil {
		return nil, err
	}
	if storeURL == "" {
		storeURL = "sqlite:" + filepath.Join(dir, "load.db")
	}
	// Every load connection comes from 127.0.0.1: no per-client connection cap.
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--store", storeURL, "--log.level", "warn", "--http.max_conns_per_client", "0"}, extra...)
	p, base, err := harness.Start(ctx, bin, args, []string{"ROLLCALL_BOOTSTRAP_TOKEN=" + loadAdminToken}, os.Stderr, harness.ListeningRE, 30*time.Second)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &target{URL: base, Token: loadAdminToken, PID: p.PID(), stop: func() {
		p.Stop(30 * time.Second)
		os.RemoveAll(dir)
	}}, nil
}

// rest calls the REST API with the admin token (harness.DoJSON).
func (t *target) rest(ctx context.Context, method, path string, body, into any) error {
	return harness.DoJSON(ctx, http.DefaultClient, t.URL, t.Token, method, path, body, into)
}

// vended is what POST /v1/agents returns.
type vended = harness.Vended

func (t *target) vend(ctx context.Context, handle string, queues []string) (vended, error) {
	return harness.Vend(ctx, http.DefaultClient, t.URL, t.Token, handle, queues)
}
