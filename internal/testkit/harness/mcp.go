package harness

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/domain"
)

// Bell is one doorbell a session received: the notification's meta and
// when the client read it.
type Bell struct {
	Meta map[string]string
	Read time.Time
}

// TodoID is the doorbell's meta.todo_id ("" for a digest).
func (b Bell) TodoID() string { return b.Meta["todo_id"] }

// DialMCPVia opens an mcp-go session on mcpURL (Streamable HTTP through hc,
// http.DefaultClient's transport when nil; the transport logging to log,
// nowhere when nil; protocol LATEST_LEGACY; the credential as bearer token;
// the GET stream open), initializes it as client name and calls tools/list: a round
// trip after initialize lets the GET stream attach. onBell, when not nil,
// gets every doorbell. It returns the client and the server's answer to
// initialize.
func DialMCPVia(ctx context.Context, hc *http.Client, log *slog.Logger, mcpURL, cred, name string, onBell func(Bell)) (*mcpclient.Client, *mcp.InitializeResult, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + cred}),
		//lint:ignore SA1019 sessions of 2025-06-18/2025-11-25 receive doorbells on the GET stream (design: MCP sessions)
		transport.WithContinuousListening(), transport.WithHTTPLogger(log)}
	if hc != nil {
		opts = append(opts, transport.WithHTTPBasicClient(hc))
	}
	tr, err := transport.NewStreamableHTTP(mcpURL, opts...)
	if err != nil {
		return nil, nil, err
	}
	c := mcpclient.NewClient(tr, mcpclient.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	if onBell != nil {
		c.OnNotification(func(n mcp.JSONRPCNotification) {
			if n.Method != domain.ChannelMethod {
				return
			}
			meta := map[string]string{}
			if m, ok := n.Params.AdditionalFields["meta"].(map[string]any); ok {
				for k, v := range m {
					meta[k], _ = v.(string)
				}
			}
			onBell(Bell{Meta: meta, Read: time.Now()})
		})
	}
	if err := c.Start(context.Background()); err != nil {
		return nil, nil, err
	}
	init, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: mcp.LATEST_LEGACY_PROTOCOL_VERSION,
		ClientInfo: mcp.Implementation{Name: name, Version: "1"}}})
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	if _, err := c.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, init, nil
}
