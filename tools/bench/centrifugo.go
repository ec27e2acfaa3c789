package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/rollcall/rollcall/internal/testkit/harness"
)

// centrifugoVersion is the peer the push and memory workloads compare with.
const centrifugoVersion = "v6.9.1"

const (
	centrifugoSecret = "bench-hmac-secret-0123456789abcdef"
	centrifugoAPIKey = "bench-api-key-0123456789abcdef"
)

// ensureCentrifugo returns the Centrifugo binary in cache, building it with
// `go install github.com/centrifugal/centrifugo/v6@<version>` (from the
// module proxy, a few minutes) when it is not there yet.
func ensureCentrifugo(ctx context.Context, cache string) (string, error) {
	dir := filepath.Join(cache, "centrifugo-"+centrifugoVersion)
	bin := filepath.Join(dir, "centrifugo")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "bench: building Centrifugo %s into %s (once; a few minutes)\n", centrifugoVersion, dir)
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "install", "github.com/centrifugal/centrifugo/v6@"+centrifugoVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-mod=mod", "GOWORK=off")
	cmd.Dir = os.TempDir() // outside any module: the peer's own go.mod decides its dependencies
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building centrifugo: %w", err)
	}
	fmt.Fprintf(os.Stderr, "bench: Centrifugo built in %s\n", time.Since(start).Round(time.Second))
	return bin, nil
}

// centrifugo is one fresh Centrifugo process: memory engine, HTTP API with a
// key, connection JWTs (HS256), uni_sse and the bidirectional WebSocket
// transport on one loopback port.
type centrifugo struct {
	*harness.Proc
	base string
	dir  string
	http *http.Client
}

func startCentrifugo(ctx context.Context, bin string, logw io.Writer) (*centrifugo, error) {
	port, err := harness.FreePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "centrifugo-bench")
	if err != nil {
		return nil, err
	}
	cfg := map[string]any{
		"http_server": map[string]any{"address": "127.0.0.1", "port": port},
		"log":         map[string]any{"level": "error"},
		"engine":      map[string]any{"type": "memory"},
		"client": map[string]any{
			"token":           map[string]any{"hmac_secret_key": centrifugoSecret},
			"allowed_origins": []string{"*"},
		},
		"http_api": map[string]any{"key": centrifugoAPIKey},
		"uni_sse":  map[string]any{"enabled": true},
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s, _, err := harness.Start(ctx, bin, []string{"--config", path}, nil, logw, nil, 0)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c := &centrifugo{Proc: s, base: "http://127.0.0.1:" + strconv.Itoa(port), dir: dir,
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	if err := waitHTTP(ctx, c.base+"/health", 60*time.Second); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

func (c *centrifugo) stop() {
	c.Stop(stopGrace)
	c.http.CloseIdleConnections()
	os.RemoveAll(c.dir)
}

// token is a connection JWT for user whose server-side subscription is the
// one personal channel given (claim `channels`).
func centrifugoToken(user, channel string) string {
	enc := base64.RawURLEncoding
	head := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	claims, _ := json.Marshal(map[string]any{"sub": user, "channels": []string{channel}})
	msg := head + "." + enc.EncodeToString(claims)
	mac := hmac.New(sha256.New, []byte(centrifugoSecret))
	mac.Write([]byte(msg))
	return msg + "." + enc.EncodeToString(mac.Sum(nil))
}

// publish publishes data to channel through the HTTP API (in memory).
func (c *centrifugo) publish(ctx context.Context, channel string, data any) error {
	code, body, err := harness.SendJSON(ctx, c.http, "POST", c.base+"/api/publish", "X-API-Key", centrifugoAPIKey, map[string]any{"channel": channel, "data": data})
	if err != nil {
		return err
	}
	if code != 200 || bytes.Contains(body, []byte(`"error"`)) {
		return fmt.Errorf("centrifugo publish: %d %s", code, body)
	}
	return nil
}

// peerConn is one idle client connection to Centrifugo.
type peerConn interface{ close() }

// pushMsg is what the bench publishes: a sequence number.
type pushMsg struct {
	Seq int `json:"seq"`
}

// frame is the part of a Centrifugo JSON protocol message the bench reads:
// a publication, at the top level (uni_sse) or under "push" (WebSocket).
type frame struct {
	ID      int64 `json:"id"`
	Connect *struct {
		Client string `json:"client"`
	} `json:"connect"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Pub *struct {
		Data pushMsg `json:"data"`
	} `json:"pub"`
	Push *frame `json:"push"`
}

// onPub receives the sequence number of each publication and the time it
// was read.
type onPub func(seq int, at time.Time)

// sseConn is a uni_sse stream (GET /connection/uni_sse?cf_connect=…).
type sseConn struct {
	cancel context.CancelFunc
	body   io.Closer
}

// dialSSE opens a uni_sse stream and returns once the connect push arrived.
func (c *centrifugo) dialSSE(ctx context.Context, hc *http.Client, user, channel string, f onPub) (*sseConn, error) {
	connect, _ := json.Marshal(map[string]any{"token": centrifugoToken(user, channel)})
	sctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(sctx, "GET", c.base+"/connection/uni_sse?cf_connect="+url.QueryEscape(string(connect)), nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("uni_sse: %s", resp.Status)
	}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		first := true
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			at := time.Now()
			var fr frame
			if err := json.Unmarshal([]byte(line), &fr); err != nil {
				continue
			}
			if first {
				first = false
				if fr.Connect == nil {
					ready <- fmt.Errorf("uni_sse: first message is not connect: %s", line)
					return
				}
				ready <- nil
				continue
			}
			if fr.Pub != nil && f != nil {
				f(fr.Pub.Data.Seq, at)
			}
		}
		if first {
			ready <- fmt.Errorf("uni_sse: stream ended before connect: %v", sc.Err())
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			resp.Body.Close()
			cancel()
			return nil, err
		}
	case <-time.After(30 * time.Second):
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("uni_sse: no connect push within 30 s")
	case <-ctx.Done():
		resp.Body.Close()
		cancel()
		return nil, ctx.Err()
	}
	return &sseConn{cancel: cancel, body: resp.Body}, nil
}

func (s *sseConn) close() { s.body.Close(); s.cancel() }

// wsConn is a bidirectional WebSocket connection speaking Centrifugo's JSON
// protocol.
type wsConn struct {
	c      *websocket.Conn
	cancel context.CancelFunc
}

// dialWS connects, sends the connect command with the token and returns once
// the reply arrived; a reader answers the server's pings ({} → {}).
func (c *centrifugo) dialWS(ctx context.Context, hc *http.Client, user, channel string, f onPub) (*wsConn, error) {
	wctx, cancel := context.WithCancel(context.Background())
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	defer dcancel()
	conn, _, err := websocket.Dial(dctx, "ws"+strings.TrimPrefix(c.base, "http")+"/connection/websocket", &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		cancel()
		return nil, err
	}
	conn.SetReadLimit(1 << 20)
	cmd, _ := json.Marshal(map[string]any{"id": 1, "connect": map[string]any{"token": centrifugoToken(user, channel), "name": "rollcall-bench"}})
	if err := conn.Write(dctx, websocket.MessageText, cmd); err != nil {
		conn.CloseNow()
		cancel()
		return nil, err
	}
	ready := make(chan error, 1)
	go func() {
		first := true
		for {
			_, b, err := conn.Read(wctx)
			if err != nil {
				if first {
					ready <- err
				}
				return
			}
			at := time.Now()
			for _, line := range bytes.Split(b, []byte("\n")) {
				line = bytes.TrimSpace(line)
				if len(line) == 0 {
					continue
				}
				if string(line) == "{}" {
					conn.Write(wctx, websocket.MessageText, []byte("{}"))
					continue
				}
				var fr frame
				if err := json.Unmarshal(line, &fr); err != nil {
					continue
				}
				if first && fr.ID == 1 {
					first = false
					if fr.Error != nil || fr.Connect == nil {
						ready <- fmt.Errorf("websocket connect refused: %s", line)
						return
					}
					ready <- nil
					continue
				}
				if fr.Push != nil && fr.Push.Pub != nil && f != nil {
					f(fr.Push.Pub.Data.Seq, at)
				}
			}
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			conn.CloseNow()
			cancel()
			return nil, err
		}
	case <-dctx.Done():
		conn.CloseNow()
		cancel()
		return nil, fmt.Errorf("websocket: no connect reply: %w", dctx.Err())
	}
	return &wsConn{c: conn, cancel: cancel}, nil
}

func (w *wsConn) close() { w.c.CloseNow(); w.cancel() }
