package oauth

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"
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
