package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"github.com/rollcall/rollcall/internal/store"
)

// Client ID Metadata Documents (design: Client registration): a client
// whose client_id is an https URL is described by the JSON document at
// that URL, fetched here (at most every OAuthMetadataClientTTL) and
// kept like a registration.

// maxMetadataBytes bounds a fetched document.
const maxMetadataBytes = 5 << 10

// isMetadataClientID reports whether a client_id names a metadata
// document: an https URL with a path and without fragment or user info.
func isMetadataClientID(id string) bool {
	u, err := url.Parse(id)
	return err == nil && u.Scheme == "https" && u.Host != "" && u.Path != "" && u.Path != "/" && u.Fragment == "" && u.User == nil
}

// publicOnlyClient fetches from public addresses only: a document URL is
// chosen by whoever sends an authorization request, so it must not reach
// the server's own network (loopback, private, link-local addresses).
func publicOnlyClient() *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		ip := net.ParseIP(host)
		if ip == nil || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip.IsMulticast() {
			return fmt.Errorf("client metadata documents are fetched from public addresses only, not %s", host)
		}
		return nil
	}}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, TLSHandshakeTimeout: 5 * time.Second},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// metadataDocument is the part of a client metadata document Rollcall reads.
type metadataDocument struct {
	ClientID                string   `json:"client_id"`
	ClientName              string   `json:"client_name"`
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
}

// metadataClient returns the client a metadata document URL names,
// fetching the document when the stored copy is older than
// OAuthMetadataClientTTL.
func (s *storage) metadataClient(ctx context.Context, id string) (store.OAuthClient, error) {
	if c, fresh := s.svc.FreshOAuthMetadataClient(ctx, id); fresh {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return store.OAuthClient{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.fetch.Do(req)
	if err != nil {
		return store.OAuthClient{}, fmt.Errorf("fetch client metadata: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return store.OAuthClient{}, fmt.Errorf("fetch client metadata: status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes+1))
	if err != nil {
		return store.OAuthClient{}, fmt.Errorf("fetch client metadata: %w", err)
	}
	if len(body) > maxMetadataBytes {
		return store.OAuthClient{}, errors.New("client metadata document larger than 5 KiB")
	}
	var doc metadataDocument
	if err := json.Unmarshal(body, &doc); err != nil {
		return store.OAuthClient{}, fmt.Errorf("client metadata document: %w", err)
	}
	if doc.ClientID != id {
		return store.OAuthClient{}, errors.New("client metadata document: client_id is not the document's URL")
	}
	if doc.TokenEndpointAuthMethod != "" && doc.TokenEndpointAuthMethod != "none" {
		return store.OAuthClient{}, errors.New("client metadata document: only token_endpoint_auth_method none is supported")
	}
	return s.svc.PutOAuthMetadataClient(ctx, id, doc.ClientName, doc.RedirectURIs)
}
